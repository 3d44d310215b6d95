package cpu

import (
	"math"

	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/pkg/errors"
)

// convert writes x converted to d's element type (C-style casts; booleans
// are 1/0 and any non-zero number is true).
func convert(d, x any) error {
	// bfloat16 is not a number type here (its Go type is a uint16): it
	// converts through float32, exactly.
	if x, ok := x.([]bfloat16.BFloat16); ok {
		if d, ok := d.([]float32); ok {
			bf16ToF32(d, x)
			return nil
		}
		f := make([]float32, len(x))
		bf16ToF32(f, x)
		return convert(d, f)
	}
	if d, ok := d.([]bfloat16.BFloat16); ok {
		f, ok := x.([]float32)
		if !ok {
			f = make([]float32, len(d))
			if err := convert(f, x); err != nil {
				return err
			}
		}
		f32ToBF16(d, f)
		return nil
	}
	switch x := x.(type) {
	case []float32:
		return convertFrom(d, x)
	case []float64:
		return convertFrom(d, x)
	case []int32:
		return convertFrom(d, x)
	case []int64:
		return convertFrom(d, x)
	case []int8:
		return convertFrom(d, x)
	case []int16:
		return convertFrom(d, x)
	case []uint8:
		return convertFrom(d, x)
	case []uint16:
		return convertFrom(d, x)
	case []uint32:
		return convertFrom(d, x)
	case []uint64:
		return convertFrom(d, x)
	case []bool:
		u := make([]uint8, len(x))
		for i, v := range x {
			if v {
				u[i] = 1
			}
		}
		return convertFrom(d, u)
	}
	return errors.Errorf("ConvertDType: unsupported source %T", x)
}

func convertFrom[S number](d any, x []S) error {
	switch d := d.(type) {
	case []float32:
		convertT(d, x)
	case []float64:
		convertT(d, x)
	case []int32:
		convertT(d, x)
	case []int64:
		convertT(d, x)
	case []int8:
		convertT(d, x)
	case []int16:
		convertT(d, x)
	case []uint8:
		convertT(d, x)
	case []uint16:
		convertT(d, x)
	case []uint32:
		convertT(d, x)
	case []uint64:
		convertT(d, x)
	case []bool:
		for i, v := range x {
			d[i] = v != 0
		}
	default:
		return errors.Errorf("ConvertDType: unsupported target %T", d)
	}
	return nil
}

func convertT[D, S number](d []D, x []S) {
	parallelRange(len(d), elemGrain, func(lo, hi int) {
		dd, xx := d[lo:hi], x[lo:hi]
		for i := range dd {
			dd[i] = D(xx[i])
		}
	})
}

func iotaAny(d any, dims []int, axis int) error {
	switch d := d.(type) {
	case []float32:
		iotaT(d, dims, axis)
	case []float64:
		iotaT(d, dims, axis)
	case []int32:
		iotaT(d, dims, axis)
	case []int64:
		iotaT(d, dims, axis)
	case []int8:
		iotaT(d, dims, axis)
	case []int16:
		iotaT(d, dims, axis)
	case []uint8:
		iotaT(d, dims, axis)
	case []uint16:
		iotaT(d, dims, axis)
	case []uint32:
		iotaT(d, dims, axis)
	case []uint64:
		iotaT(d, dims, axis)
	default:
		return errors.Errorf("Iota: unsupported dtype %T", d)
	}
	return nil
}

func iotaT[T number](d []T, dims []int, axis int) {
	inner := 1
	for _, x := range dims[axis+1:] {
		inner *= x
	}
	n := dims[axis]
	for i := range d {
		d[i] = T((i / inner) % n)
	}
}

// bf16ToF32 widens x into d (the same length): a bfloat16 is the top 16
// bits of a float32, so this is exact.
func bf16ToF32(d []float32, x []bfloat16.BFloat16) {
	parallelRange(len(d), elemGrain, func(lo, hi int) { bf16ToF32Serial(d[lo:hi], x[lo:hi]) })
}

func bf16ToF32Serial(d []float32, x []bfloat16.BFloat16) {
	i := simdBF16ToF32(d, x)
	for ; i < len(d); i++ {
		d[i] = x[i].Float32()
	}
}

// f32ToBF16 rounds x into d to the nearest bfloat16, ties to even; NaN
// stays NaN (quiet). bfloat16.FromFloat32 keeps a NaN's top bits as they
// are, which turns a NaN whose payload is in its low bits into Inf.
func f32ToBF16(d []bfloat16.BFloat16, x []float32) {
	for i, v := range x {
		b := math.Float32bits(v)
		if v != v {
			d[i] = bfloat16.BFloat16(b>>16 | 0x40)
			continue
		}
		d[i] = bfloat16.BFloat16((b + 0x7fff + (b>>16)&1) >> 16)
	}
}
