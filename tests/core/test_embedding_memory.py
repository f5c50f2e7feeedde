"""The process that embeds keeps glibc from holding freed activations (``ragaudit.index.embedding.fix_mmap_threshold``):
large blocks get mappings of their own, so a document's embedding returns its memory as it goes."""

from __future__ import annotations

import ctypes
import ctypes.util

from ragaudit.index import embedding


def _libc():
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.malloc.argtypes, libc.malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
    libc.free.argtypes, libc.free.restype = [ctypes.c_void_p], None
    return libc


def _is_mmapped(ptr: int) -> bool:
    """glibc's chunk header: the size word just before the user pointer has bit 1 (IS_MMAPPED) set
    for a block that has a mapping of its own (glibc malloc/malloc.c, ``chunk_is_mmapped``)."""
    return bool(ctypes.c_size_t.from_address(ptr - ctypes.sizeof(ctypes.c_size_t)).value & 2)


def test_the_setting_fixes_the_threshold_and_the_default_leaves_glibcs(tmp_path, monkeypatch):
    """``embedding_mmap_threshold_mb`` > 0 makes ``Services.embedder`` call ``fix_mmap_threshold``
    with that many bytes before the model is used; the default 0 never calls it (a fixed threshold cost
    ~40% more embedding CPU on a quiet machine, so it is opt-in). Fails if the setting is not wired or
    the default turns the fixed threshold on."""
    from ragaudit import services as services_mod
    from ragaudit.platform.settings import Settings

    calls: list[int] = []
    monkeypatch.setattr(services_mod, "fix_mmap_threshold", lambda n: calls.append(n) or True)
    for mb, want in ((0.0, []), (1.0, [1 << 20])):
        calls.clear()
        st = Settings(_env_file=None, data_dir=tmp_path / f"d{mb}", embedding_mmap_threshold_mb=mb)
        _ = services_mod.Services(st).embedder
        assert calls == want, (mb, calls)
    assert Settings(_env_file=None, data_dir=tmp_path).embedding_mmap_threshold_mb == 0


def test_large_blocks_keep_their_own_mapping_once_the_threshold_is_fixed():
    """After ``fix_mmap_threshold()`` a 2 MB block is still mapped on its own after an 8 MB mapped
    block was freed, while a 512 KB block comes from the heap (the threshold is the fixed
    ``MMAP_THRESHOLD_BYTES``, 1 MB).
    Fails if the binding is a silent no-op on this glibc machine (glibc's dynamic threshold then
    rises to 8 MB at that free, and the 2 MB block, like the model's activation tensors, comes from
    the heap that kept 206 MB of freed activations on the bench's windows), or if the threshold is
    set far from 1 MB."""
    import subprocess
    import sys
    import textwrap

    # a fresh process: glibc serves a request from free heap chunks before it considers mmap, so in
    # a process that already embedded (the rest of the suite) the blocks could come from the heap
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, ".")
        from tests.core.test_embedding_memory import _check_fixed_threshold
        _check_fixed_threshold()
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def _check_fixed_threshold() -> None:
    assert embedding.fix_mmap_threshold() is True
    assert embedding.MMAP_THRESHOLD_BYTES == 1 << 20
    libc = _libc()
    big = libc.malloc(8 << 20)
    assert big and _is_mmapped(big)
    libc.free(big)  # with a dynamic threshold, this free raises it to 8 MB
    blocks = [libc.malloc(2 << 20), libc.malloc(512 << 10)]
    try:
        assert all(blocks)
        assert _is_mmapped(blocks[0]), "a 2 MB block came from the heap: the mmap threshold is not fixed"
        assert not _is_mmapped(blocks[1]), "a 512 KB block was mapped: the threshold is below 1 MB"
    finally:
        for b in blocks:
            libc.free(b)


def test_torch_allocates_large_tensors_with_huge_page_advice(embedder):
    """``ragaudit.index.embedding`` sets ``THP_MEM_ALLOC_ENABLE=1`` before torch loads, and torch's CPU
    allocator honours it: tensors of 2 MB and more are page-aligned (c10 ``alloc_cpu`` aligns them
    to the page and advises ``MADV_HUGEPAGE``; without the variable it aligns to 64 bytes), smaller
    ones are not advised. Fails if the variable is no longer set, or is set after torch's first
    allocation (it is read once): mapping every large activation then costs a fault per 4 KB page
    (+26% CPU time measured, against +12% with huge pages)."""
    import os

    import torch

    assert os.environ.get("THP_MEM_ALLOC_ENABLE") == "1"
    large = [torch.empty(n, dtype=torch.float32) for n in (600_000, 2_000_000, 6_000_000)]  # 2.4-24 MB
    assert all(t.data_ptr() % 4096 == 0 for t in large), [t.data_ptr() % 4096 for t in large]
