package cpu

import (
	"github.com/pkg/errors"
)

// convert writes x converted to d's element type (C-style casts; booleans
// are 1/0 and any non-zero number is true).
func convert(d, x any) error {
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
