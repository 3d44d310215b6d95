# Generates kernel_amd64.s: python3 testdata/gen_kernels.py > kernel_amd64.s
import sys
def kernel(name, mr, nvec, reg, vbytes, unroll):
    # accumulators: reg index 4.. ; B loads: 0..nvec-1 ; broadcast: 2 regs after B
    nb = nvec
    bc = [nb, nb+1]
    acc0 = nb+2
    nr = nvec*vbytes//4
    L = []
    w = L.append
    w(f"// func {name}(kc int, a, b, c *float32, ldc int, accumulate bool)")
    w(f"TEXT ·{name}(SB), NOSPLIT, $0-41")
    w("\tMOVQ kc+0(FP), CX")
    w("\tMOVQ a+8(FP), SI")
    w("\tMOVQ b+16(FP), DI")
    w("\tMOVQ c+24(FP), DX")
    w("\tMOVQ ldc+32(FP), R8")
    w("\tMOVBLZX accumulate+40(FP), R9")
    w("\tSHLQ $2, R8")
    for i in range(mr*nvec):
        r = f"{reg}{acc0+i}"
        w(f"\tVXORPS {r}, {r}, {r}")
    def step(off_a, off_b):
        for v in range(nvec):
            w(f"\tVMOVUPS {off_b+v*vbytes}(DI), {reg}{v}")
        for r in range(mr):
            br = f"{reg}{bc[r%2]}"
            w(f"\tVBROADCASTSS {off_a+4*r}(SI), {br}")
            for v in range(nvec):
                w(f"\tVFMADD231PS {reg}{v}, {br}, {reg}{acc0+r*nvec+v}")
    w(f"\tCMPQ CX, ${unroll}")
    w("\tJLT tail")
    w("loop:")
    for u in range(unroll):
        step(u*4*mr, u*nr*4)
    w(f"\tADDQ ${unroll*4*mr}, SI")
    w(f"\tADDQ ${unroll*4*nr}, DI")
    w(f"\tSUBQ ${unroll}, CX")
    w(f"\tCMPQ CX, ${unroll}")
    w("\tJGE loop")
    w("tail:")
    w("\tTESTQ CX, CX")
    w("\tJZ store")
    w("tailloop:")
    step(0, 0)
    w(f"\tADDQ ${4*mr}, SI")
    w(f"\tADDQ ${4*nr}, DI")
    w("\tDECQ CX")
    w("\tJNZ tailloop")
    w("store:")
    w("\tTESTQ R9, R9")
    w("\tJZ write")
    for r in range(mr):
        for v in range(nvec):
            a = f"{reg}{acc0+r*nvec+v}"
            w(f"\tVADDPS {v*vbytes}(DX)(R8*1), {a}, {a}" if False else f"\tVADDPS {v*vbytes}(DX), {a}, {a}")
        if r < mr-1:
            w("\tADDQ R8, DX")
    w("\tMOVQ c+24(FP), DX")
    w("write:")
    for r in range(mr):
        for v in range(nvec):
            w(f"\tVMOVUPS {reg}{acc0+r*nvec+v}, {v*vbytes}(DX)")
        if r < mr-1:
            w("\tADDQ R8, DX")
    w("\tVZEROUPPER")
    w("\tRET")
    return "\n".join(L) + "\n"

hdr = "//go:build amd64\n\n#include \"textflag.h\"\n\n// SGEMM micro-kernels. Packed A panels hold mr floats per k step, packed B\n// panels nr floats per k step; the k loop is unrolled 4 times. The B row is\n// loaded into registers 0-1, A values are broadcast into registers 2-3 in\n// turn, and the mr x nr tile of C accumulates in the remaining registers.\n// If accumulate is set the tile is added to C, otherwise it overwrites C.\n\n"
# labels must be unique per file in Go asm? They are function-local, fine.
sys.stdout.write(hdr)
sys.stdout.write("// C[6x16] (+)= A[6xkc]·B[kcx16]; accumulators Y4..Y15.\n")
sys.stdout.write(kernel("sgemmKernel6x16AVX2", 6, 2, "Y", 32, 4))
sys.stdout.write("\n// C[12x32] (+)= A[12xkc]·B[kcx32]; accumulators Z4..Z27.\n")
sys.stdout.write(kernel("sgemmKernel12x32AVX512", 12, 2, "Z", 64, 4))
