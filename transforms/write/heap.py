"""Keep freed memory in a shard-writer process rather than hand it back to the OS per image.

A shard writer allocates and frees several image-sized buffers per record: the file's bytes,
the serialized Example, its framing. glibc serves a block over its mmap threshold (128 KiB at
start, then adjusted) with fresh mmap'd pages, and returns the top of the heap to the OS once
more than its trim threshold is free, so an image-sized buffer keeps landing on pages the kernel
must fault in again: a conversion of large photos then spends much of its time in the kernel,
faulting. Fixed thresholds (which also stop glibc adjusting them) keep the pages in the
process. Other C libraries are left as they are.
"""

import ctypes
import functools

_M_TRIM_THRESHOLD = -1  # mallopt parameter numbers, from glibc's malloc.h
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # the most glibc's own adjustment would reach on 64-bit
TRIM_THRESHOLD = 64 << 20  # free memory kept at the top of the heap


@functools.cache
def keep_freed_memory() -> bool:
    """Set this process's malloc thresholds, once; whether the C library took them (glibc
    does)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError, TypeError):  # no mallopt, or no C library to open by None
        return False
    took_mmap = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    return mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and took_mmap
