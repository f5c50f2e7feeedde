"""ragaudit core: ingestion, retrieval, answers, evaluation."""

import os

# OpenMP threads (torch's intra-op pool) spin-wait between parallel regions by default; on a
# machine with more runnable threads than cores (concurrent requests, ingestion beside queries, a
# shared CI box) the spinning threads take the cores the work needs. Measured here at load 17 on
# 2 cores: one query embedding 1,760 ms (spinning) vs 33 ms (passive), a 64-text batch 7.0 s vs
# 1.3 s. Read once when libgomp loads, i.e. before torch is imported: set it at package import.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
