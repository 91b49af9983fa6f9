package npu

import (
	"errors"
	"fmt"
)

var matmulTypeNames = map[MatmulType]string{
	Float16MMFloat16ToFloat32: "FLOAT16_MM_FLOAT16_TO_FLOAT32",
	Int8MMInt8ToInt32:         "INT8_MM_INT8_TO_INT32",
	Int8MMInt8ToInt8:          "INT8_MM_INT8_TO_INT8",
	Float16MMFloat16ToFloat16: "FLOAT16_MM_FLOAT16_TO_FLOAT16",
	Float16MMInt8ToFloat32:    "FLOAT16_MM_INT8_TO_FLOAT32",
	Float16MMInt8ToFloat16:    "FLOAT16_MM_INT8_TO_FLOAT16",
	Float16MMInt4ToFloat32:    "FLOAT16_MM_INT4_TO_FLOAT32",
	Float16MMInt4ToFloat16:    "FLOAT16_MM_INT4_TO_FLOAT16",
	Int8MMInt8ToFloat32:       "INT8_MM_INT8_TO_FLOAT32",
	Int4MMInt4ToInt16:         "INT4_MM_INT4_TO_INT16",
	Int8MMInt4ToInt32:         "INT8_MM_INT4_TO_INT32",
	Float16MMInt4ToBFloat16:   "FLOAT16_MM_INT4_TO_BFLOAT16",
	Int8MMInt4ToFloat16:       "INT8_MM_INT4_TO_FLOAT16",
}

func (t MatmulType) String() string {
	if s, ok := matmulTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("MatmulType(%d)", int32(t))
}

// Tensors returns the element types of A, B and C for a matmul type.
func (t MatmulType) Tensors() (a, b, c TensorType, ok bool) {
	switch t {
	case Float16MMFloat16ToFloat32:
		return TensorFloat16, TensorFloat16, TensorFloat32, true
	case Int8MMInt8ToInt32:
		return TensorInt8, TensorInt8, TensorInt32, true
	case Int8MMInt8ToInt8:
		return TensorInt8, TensorInt8, TensorInt8, true
	case Float16MMFloat16ToFloat16:
		return TensorFloat16, TensorFloat16, TensorFloat16, true
	case Float16MMInt8ToFloat32:
		return TensorFloat16, TensorInt8, TensorFloat32, true
	case Float16MMInt8ToFloat16:
		return TensorFloat16, TensorInt8, TensorFloat16, true
	case Float16MMInt4ToFloat32:
		return TensorFloat16, TensorInt4, TensorFloat32, true
	case Float16MMInt4ToFloat16:
		return TensorFloat16, TensorInt4, TensorFloat16, true
	case Int8MMInt8ToFloat32:
		return TensorInt8, TensorInt8, TensorFloat32, true
	case Int4MMInt4ToInt16:
		return TensorInt4, TensorInt4, TensorInt16, true
	case Int8MMInt4ToInt32:
		return TensorInt8, TensorInt4, TensorInt32, true
	case Float16MMInt4ToBFloat16:
		return TensorFloat16, TensorInt4, TensorBFloat16, true
	case Int8MMInt4ToFloat16:
		return TensorInt8, TensorInt4, TensorFloat16, true
	}
	return 0, 0, 0, false
}

var tensorTypeNames = [...]string{"FP32", "FP16", "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "BOOL", "INT4", "BF16"}

func (t TensorType) String() string {
	if int(t) < len(tensorTypeNames) {
		return tensorTypeNames[t]
	}
	return fmt.Sprintf("TensorType(%d)", uint32(t))
}

// Bits is the storage width of one element (int4 packs two per byte).
func (t TensorType) Bits() int {
	switch t {
	case TensorFloat32, TensorInt32, TensorUint32:
		return 32
	case TensorFloat16, TensorInt16, TensorUint16, TensorBFloat16:
		return 16
	case TensorInt8, TensorUint8, TensorBool:
		return 8
	case TensorInt64:
		return 64
	case TensorInt4:
		return 4
	}
	return 0
}

// IsFloat reports whether elements are floating point.
func (t TensorType) IsFloat() bool {
	return t == TensorFloat32 || t == TensorFloat16 || t == TensorBFloat16
}

func (l Layout) String() string {
	switch l {
	case LayoutNorm:
		return "NORM"
	case LayoutNative:
		return "NATIVE"
	case LayoutTPNorm:
		return "TP_NORM"
	}
	return fmt.Sprintf("Layout(%d)", int16(l))
}

// ErrorName is the rknn_api.h name of an RKNN return code.
func ErrorName(code int) string {
	switch code {
	case 0:
		return "RKNN_SUCC"
	case ErrFail:
		return "RKNN_ERR_FAIL"
	case ErrTimeout:
		return "RKNN_ERR_TIMEOUT"
	case ErrDeviceUnavailable:
		return "RKNN_ERR_DEVICE_UNAVAILABLE"
	case ErrMallocFail:
		return "RKNN_ERR_MALLOC_FAIL"
	case ErrParamInvalid:
		return "RKNN_ERR_PARAM_INVALID"
	case ErrModelInvalid:
		return "RKNN_ERR_MODEL_INVALID"
	case ErrCtxInvalid:
		return "RKNN_ERR_CTX_INVALID"
	case ErrInputInvalid:
		return "RKNN_ERR_INPUT_INVALID"
	case ErrOutputInvalid:
		return "RKNN_ERR_OUTPUT_INVALID"
	case ErrDeviceUnmatch:
		return "RKNN_ERR_DEVICE_UNMATCH"
	}
	return fmt.Sprintf("RKNN error %d", code)
}

// Code returns the RKNN return code carried by err (0 for nil, ErrFail for
// errors that are not *Error).
func Code(err error) int {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ErrFail
}
