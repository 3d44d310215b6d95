#include "textflag.h"

// The constants of math.Log's amd64 routine (src/math/log_amd64.s), one
// float64 or int64 each, broadcast to all lanes.
DATA gconst<>+0x00(SB)/8, $0x000FFFFFFFFFFFFF // mantissa mask
DATA gconst<>+0x08(SB)/8, $0x3FE0000000000000 // 0.5: frexp's exponent bits, and hfsq's factor
DATA gconst<>+0x10(SB)/8, $0x7FF              // exponent mask after the shift
DATA gconst<>+0x18(SB)/8, $0x3FE              // exponent bias of frexp
DATA gconst<>+0x20(SB)/8, $7.07106781186547524401e-01 // sqrt(2)/2
DATA gconst<>+0x28(SB)/8, $1.0
DATA gconst<>+0x30(SB)/8, $2.0
DATA gconst<>+0x38(SB)/8, $6.666666666666735130e-01 // L1
DATA gconst<>+0x40(SB)/8, $3.999999999940941908e-01 // L2
DATA gconst<>+0x48(SB)/8, $2.857142874366239149e-01 // L3
DATA gconst<>+0x50(SB)/8, $2.222219843214978396e-01 // L4
DATA gconst<>+0x58(SB)/8, $1.818357216161805012e-01 // L5
DATA gconst<>+0x60(SB)/8, $1.531383769920937332e-01 // L6
DATA gconst<>+0x68(SB)/8, $1.479819860511658591e-01 // L7
DATA gconst<>+0x70(SB)/8, $6.93147180369123816490e-01 // Ln2Hi
DATA gconst<>+0x78(SB)/8, $1.90821492927058770002e-10 // Ln2Lo
DATA gconst<>+0x80(SB)/8, $0x8000000000000000 // sign bit
GLOBL gconst<>(SB), RODATA|NOPTR, $0x88

// LOG sets Z9 = log(Z8) for 8 positive normal float64, with math.Log's
// operations in its order (comments name its variables). Clobbers Z0-Z7, K1.
#define LOG \
	VPANDQ    Z16, Z8, Z2  \ // f1 = frexp fraction: mantissa | 0.5's exponent
	VPORQ     Z17, Z2, Z2  \
	VPSRLQ    $52, Z8, Z1  \ // k = exponent - 0x3FE
	VPANDQ    Z18, Z1, Z1  \
	VPSUBQ    Z19, Z1, Z1  \
	VCVTQQ2PD Z1, Z1       \
	VCMPPD    $2, Z20, Z2, K1 \ // f1 <= sqrt(2)/2 (the routine's CMPSD not-less-than): k -= 1, f1 *= 2
	VXORPD    Z3, Z3, Z3   \
	VMOVAPD   Z21, K1, Z3  \ // x3 = 1 or 0
	VSUBPD    Z3, Z1, Z1   \ // k -= x3
	VADDPD    Z21, Z3, Z3  \ // x3 = 2 or 1
	VMULPD    Z3, Z2, Z2   \ // f1 *= x3
	VSUBPD    Z21, Z2, Z2  \ // f = f1 - 1
	VADDPD    Z2, Z22, Z0  \ // 2 + f
	VDIVPD    Z0, Z2, Z3   \ // s = f / (2 + f)
	VMULPD    Z3, Z3, Z4   \ // s2 = s * s
	VMULPD    Z4, Z4, Z5   \ // s4 = s2 * s2
	VMULPD    Z29, Z5, Z6  \ // t1 = s2 * (L1 + s4*(L3 + s4*(L5 + s4*L7)))
	VADDPD    Z27, Z6, Z6  \
	VMULPD    Z5, Z6, Z6   \
	VADDPD    Z25, Z6, Z6  \
	VMULPD    Z5, Z6, Z6   \
	VADDPD    Z23, Z6, Z6  \
	VMULPD    Z6, Z4, Z4   \
	VMULPD    Z28, Z5, Z6  \ // t2 = s4 * (L2 + s4*(L4 + s4*L6))
	VADDPD    Z26, Z6, Z6  \
	VMULPD    Z5, Z6, Z6   \
	VADDPD    Z24, Z6, Z6  \
	VMULPD    Z6, Z5, Z5   \
	VADDPD    Z5, Z4, Z4   \ // R = t1 + t2
	VMULPD    Z17, Z2, Z0  \ // hfsq = 0.5 * f * f
	VMULPD    Z2, Z0, Z0   \
	VADDPD    Z0, Z4, Z4   \ // hfsq + R
	VMULPD    Z4, Z3, Z3   \ // s * (hfsq + R)
	VMULPD    Z31, Z1, Z4  \ // k * Ln2Lo
	VADDPD    Z4, Z3, Z3   \
	VSUBPD    Z3, Z0, Z0   \ // hfsq - (s*(hfsq+R) + k*Ln2Lo)
	VSUBPD    Z2, Z0, Z0   \ // ... - f
	VMULPD    Z30, Z1, Z1  \ // k * Ln2Hi
	VSUBPD    Z0, Z1, Z9     // k*Ln2Hi - (...)

// func transformVector(dst []float32, u []float64)
TEXT ·transformVector(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ u_base+24(FP), SI
	VBROADCASTSD gconst<>+0x00(SB), Z16
	VBROADCASTSD gconst<>+0x08(SB), Z17
	VBROADCASTSD gconst<>+0x10(SB), Z18
	VBROADCASTSD gconst<>+0x18(SB), Z19
	VBROADCASTSD gconst<>+0x20(SB), Z20
	VBROADCASTSD gconst<>+0x28(SB), Z21
	VBROADCASTSD gconst<>+0x30(SB), Z22
	VBROADCASTSD gconst<>+0x38(SB), Z23
	VBROADCASTSD gconst<>+0x40(SB), Z24
	VBROADCASTSD gconst<>+0x48(SB), Z25
	VBROADCASTSD gconst<>+0x50(SB), Z26
	VBROADCASTSD gconst<>+0x58(SB), Z27
	VBROADCASTSD gconst<>+0x60(SB), Z28
	VBROADCASTSD gconst<>+0x68(SB), Z29
	VBROADCASTSD gconst<>+0x70(SB), Z30
	VBROADCASTSD gconst<>+0x78(SB), Z31
	VBROADCASTSD gconst<>+0x80(SB), Z15

loop:
	CMPQ CX, $8
	JLT  done
	VMOVUPD (SI), Z8
	LOG
	VXORPD Z15, Z9, Z8 // -log(u)
	LOG
	VXORPD Z15, Z9, Z9 // -log(-log(u))
	VCVTPD2PS Z9, Y10
	VMOVUPS Y10, (DI)
	ADDQ $64, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  loop

done:
	VZEROUPPER
	RET
