"""The process that embeds keeps glibc from holding freed activations (``core.embedding.fix_mmap_threshold``):
large blocks get mappings of their own, so a document's embedding returns its memory as it goes."""

from __future__ import annotations

import ctypes
import ctypes.util

from core import embedding


def _libc():
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.malloc.argtypes, libc.malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
    libc.free.argtypes, libc.free.restype = [ctypes.c_void_p], None
    return libc


def _is_mmapped(ptr: int) -> bool:
    """glibc's chunk header: the size word just before the user pointer has bit 1 (IS_MMAPPED) set
    for a block that has a mapping of its own (glibc malloc/malloc.c, ``chunk_is_mmapped``)."""
    return bool(ctypes.c_size_t.from_address(ptr - ctypes.sizeof(ctypes.c_size_t)).value & 2)


def test_large_blocks_keep_their_own_mapping_after_the_embedder_loads(embedder):
    """Once an ``Embedder`` exists, a 2 MB block is still mapped on its own after an 8 MB mapped
    block was freed, while a 512 KB block comes from the heap (the threshold is the fixed
    ``MMAP_THRESHOLD_BYTES``, 1 MB).
    Fails if ``Embedder`` stops calling ``fix_mmap_threshold`` (glibc's dynamic threshold then
    rises to 8 MB at that free, and the 2 MB block, like the model's activation tensors, comes from
    the heap that kept 206 MB of freed activations on the bench's windows), if the binding is a
    silent no-op on this glibc machine, or if the threshold is set far from 1 MB."""
    assert embedder.mmap_threshold_fixed is True
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

