#!/usr/bin/env python3
"""Rewrites a kernels/cuda/*.cu file into host C++ for the CPU emulation (scripts/cuda_emulation/run.sh).

Three textual changes, nothing else: a launch `kernel<<<grid, block, shared, stream>>>(args)` becomes
`::emu::launch(::emu::cfg(grid, block, shared, stream), kernel, args)`; `extern __shared__ T name[];`
becomes a pointer to the emulated dynamic shared memory; the cp.async inline PTX becomes a synchronous
copy with the same zero fill (so the emulation checks what lands where, not the pipeline's ordering).
Usage: transform.py IN.cu OUT.cpp
"""
import re
import sys

source, target = sys.argv[1], sys.argv[2]
text = open(source).read()
text = re.sub(r'extern __shared__ ([\w ]+?) (\w+)\[\];',
              r'\1* \2 = reinterpret_cast<\1*>(::emu::dynamic_shared());', text)
text = re.sub(r'([A-Za-z_]\w*(?:<[^<>;]*>)?)\s*<<<(.*?)>>>\(',
              r'::emu::launch(::emu::cfg(\2), \1, ', text, flags=re.S)
text = re.sub(r'asm volatile\("cp\.async\.cg\.shared\.global.*?\);',
              'std::memcpy(dst, src, src_bytes); '
              'std::memset(static_cast<char*>(dst) + src_bytes, 0, 16 - src_bytes); (void)dst_shared;',
              text, flags=re.S)
text = re.sub(r'asm volatile\("cp\.async\.(commit_group|wait_group \d);\\n" ::: "memory"\);', ';', text)
leftover = [line for line in text.splitlines() if 'asm volatile' in line]
if leftover:
    sys.exit(f'{source}: inline assembly the emulation does not know: {leftover}')
open(target, 'w').write(text)
