package xla

import (
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
)

func shapesOf(dt dtypes.DType, dims ...int) shapes.Shape { return shapes.Make(dt, dims...) }
