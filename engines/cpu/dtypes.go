package cpu

import (
	"unsafe"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/pkg/errors"
)

// supportedDTypes are the dtypes buffers and data-movement ops handle.
// Arithmetic is narrower: see the kernels in opTable.
var supportedDTypes = []dtypes.DType{
	dtypes.Float32, dtypes.Float64, dtypes.Int32, dtypes.Int64, dtypes.Int8, dtypes.Int16,
	dtypes.Uint8, dtypes.Uint16, dtypes.Uint32, dtypes.Uint64, dtypes.Bool, dtypes.BFloat16,
}

func isIndexDType(dt dtypes.DType) bool {
	switch dt {
	case dtypes.Int32, dtypes.Int64, dtypes.Uint8, dtypes.Uint16, dtypes.Uint32, dtypes.Uint64, dtypes.Int8, dtypes.Int16:
		return true
	}
	return false
}

// isNumber: the dtypes with arithmetic. BFloat16 is storage only: its
// buffers move (reshape, slice, gather, concatenate, ...) and convert to
// and from other dtypes, and a product with a bfloat16 operand converted
// to float32 reads it as it goes (see foldBF16Converts).
func isNumber(dt dtypes.DType) bool {
	return dt != dtypes.Bool && dt != dtypes.InvalidDType && dt != dtypes.BFloat16
}

// hugeAdviceBytes: float32 buffers of at least this size ask for
// transparent huge pages (adviseHugePages).
const hugeAdviceBytes = 4 << 20

// newF32 returns a new zeroed float32 buffer of n values, advised onto
// huge pages when large.
func newF32(n int) []float32 {
	f := make([]float32, n)
	if n > 0 {
		adviseHugePages(unsafe.Pointer(&f[0]), 4*n)
	}
	return f
}

// makeFlat allocates a zeroed Go slice for n values of dt.
func makeFlat(dt dtypes.DType, n int) (any, error) {
	switch dt {
	case dtypes.Float32:
		return newF32(n), nil
	case dtypes.Float64:
		return make([]float64, n), nil
	case dtypes.Int32:
		return make([]int32, n), nil
	case dtypes.Int64:
		return make([]int64, n), nil
	case dtypes.Int8:
		return make([]int8, n), nil
	case dtypes.Int16:
		return make([]int16, n), nil
	case dtypes.Uint8:
		return make([]uint8, n), nil
	case dtypes.Uint16:
		return make([]uint16, n), nil
	case dtypes.Uint32:
		return make([]uint32, n), nil
	case dtypes.Uint64:
		return make([]uint64, n), nil
	case dtypes.Bool:
		return make([]bool, n), nil
	case dtypes.BFloat16:
		return make([]bfloat16.BFloat16, n), nil
	}
	return nil, errors.Errorf("backend %q: dtype %s is not supported", Name, dt)
}

// flatInfo returns the dtype and length of a flat slice.
func flatInfo(flat any) (dtypes.DType, int, error) {
	switch f := flat.(type) {
	case []float32:
		return dtypes.Float32, len(f), nil
	case []float64:
		return dtypes.Float64, len(f), nil
	case []int32:
		return dtypes.Int32, len(f), nil
	case []int64:
		return dtypes.Int64, len(f), nil
	case []int8:
		return dtypes.Int8, len(f), nil
	case []int16:
		return dtypes.Int16, len(f), nil
	case []uint8:
		return dtypes.Uint8, len(f), nil
	case []uint16:
		return dtypes.Uint16, len(f), nil
	case []uint32:
		return dtypes.Uint32, len(f), nil
	case []uint64:
		return dtypes.Uint64, len(f), nil
	case []bool:
		return dtypes.Bool, len(f), nil
	case []bfloat16.BFloat16:
		return dtypes.BFloat16, len(f), nil
	}
	return dtypes.InvalidDType, 0, errors.Errorf("backend %q: unsupported flat data type %T", Name, flat)
}

func flatLen(flat any) int {
	_, n, _ := flatInfo(flat)
	return n
}

// copyFlat copies src into dst (slices of the same element type) and
// returns the number of elements copied.
func copyFlat(dst, src any) (int, error) {
	switch d := dst.(type) {
	case []float32:
		return copyT(d, src)
	case []float64:
		return copyT(d, src)
	case []int32:
		return copyT(d, src)
	case []int64:
		return copyT(d, src)
	case []int8:
		return copyT(d, src)
	case []int16:
		return copyT(d, src)
	case []uint8:
		return copyT(d, src)
	case []uint16:
		return copyT(d, src)
	case []uint32:
		return copyT(d, src)
	case []uint64:
		return copyT(d, src)
	case []bool:
		return copyT(d, src)
	case []bfloat16.BFloat16:
		return copyT(d, src)
	}
	return 0, errors.Errorf("unsupported flat data type %T", dst)
}

func copyT[T any](dst []T, src any) (int, error) {
	s, ok := src.([]T)
	if !ok {
		return 0, errors.Errorf("flat data of type %T, expected %T", src, dst)
	}
	if len(s) != len(dst) {
		return min(len(s), len(dst)), errors.Errorf("flat data has %d elements, expected %d", len(s), len(dst))
	}
	return copy(dst, s), nil
}
