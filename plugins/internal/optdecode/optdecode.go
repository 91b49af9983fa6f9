// Package optdecode decodes a plugin's options, the spec's free-form
// `options:` object as the host sends it (JSON-decoded: numbers are
// float64, lists []any, objects map[string]any), into the plugin's option
// structs. It is strict, so a typo in a spec is an error rather than an
// option silently left at its default:
//
//   - an option is a struct field's json tag name (a field without a tag:
//     its Go name; tag "-" and unexported fields are not options); a nested
//     struct is an object with options of its own, named "outer.inner" in
//     errors;
//   - an unknown option is an error naming it and listing the valid ones;
//   - a value of the wrong type is an error naming the option and the type
//     it wants ("an integer", "a string", "true or false", ...);
//   - null leaves the field at its zero value, as a missing option does.
//
// Checking values (ranges, enumerations) is the plugin's, after Decode.
package optdecode

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
)

// Decode sets the fields of the structs dsts point to from opts. Every key
// must name an option of one of them (plugins decode the engine's options
// and their own in one call, so an unknown name lists every valid one). A
// name declared by two of dsts, or a dst that is not a pointer to a struct,
// is a programming error and panics.
func Decode(opts map[string]any, dsts ...any) error {
	fields := map[string]reflect.Value{}
	for _, dst := range dsts {
		v := reflect.ValueOf(dst)
		if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
			panic(fmt.Sprintf("optdecode.Decode: %T is not a pointer to a struct", dst))
		}
		for name, f := range options(v.Elem()) {
			if _, dup := fields[name]; dup {
				panic(fmt.Sprintf("optdecode.Decode: option %q is declared twice", name))
			}
			fields[name] = f
		}
	}
	return decodeObject(opts, fields, "")
}

// options maps the option names of struct value s to its fields.
func options(s reflect.Value) map[string]reflect.Value {
	fields := map[string]reflect.Value{}
	for f, v := range s.Fields() {
		if name := optionName(f); name != "" {
			fields[name] = v
		}
	}
	return fields
}

// optionName is f's option name, "" if it is not an option.
func optionName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return f.Name
	}
	return name
}

// decodeObject sets fields from the object's keys in sorted order, so the
// first error is the same on every run; prefix is the enclosing option's
// name and a dot ("" at the top).
func decodeObject(obj map[string]any, fields map[string]reflect.Value, prefix string) error {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		f, ok := fields[k]
		if !ok {
			valid := make([]string, 0, len(fields))
			for n := range fields {
				valid = append(valid, n)
			}
			slices.Sort(valid)
			if prefix == "" {
				return fmt.Errorf("unknown option %q (valid options: %s)", k, strings.Join(valid, ", "))
			}
			return fmt.Errorf("unknown option %q (valid options in %q: %s)", prefix+k, strings.TrimSuffix(prefix, "."), strings.Join(valid, ", "))
		}
		if err := decodeValue(obj[k], f, prefix+k); err != nil {
			return err
		}
	}
	return nil
}

// decodeValue sets f (a field, or a list element) to v; name is the
// option's name in errors.
func decodeValue(v any, f reflect.Value, name string) error {
	if v == nil {
		return nil
	}
	t := f.Type()
	wrong := func() error { return fmt.Errorf("option %q: want %s, got %s", name, want(t), describe(v)) }
	rv := reflect.ValueOf(v)
	switch t.Kind() {
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		if err := decodeValue(v, p.Elem(), name); err != nil {
			return err
		}
		f.Set(p)
	case reflect.Interface:
		if !rv.Type().AssignableTo(t) {
			return wrong()
		}
		f.Set(rv)
	case reflect.String:
		if rv.Kind() != reflect.String {
			return wrong()
		}
		f.SetString(rv.String())
	case reflect.Bool:
		if rv.Kind() != reflect.Bool {
			return wrong()
		}
		f.SetBool(rv.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, ok := integer(rv)
		switch {
		case !ok:
			return wrong()
		case !fitsInt64(rv) || f.OverflowInt(i):
			return fmt.Errorf("option %q: %s does not fit in %s", name, describe(v), t)
		}
		f.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		i, ok := integer(rv)
		switch {
		case !ok:
			return wrong()
		case i < 0 && fitsInt64(rv):
			return wrong()
		case !fitsInt64(rv) || f.OverflowUint(uint64(i)):
			return fmt.Errorf("option %q: %s does not fit in %s", name, describe(v), t)
		}
		f.SetUint(uint64(i))
	case reflect.Float32, reflect.Float64:
		x, ok := number(rv)
		if !ok {
			return wrong()
		}
		f.SetFloat(x)
	case reflect.Slice:
		if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
			return wrong()
		}
		s := reflect.MakeSlice(t, rv.Len(), rv.Len())
		for i := range rv.Len() {
			if err := decodeValue(rv.Index(i).Interface(), s.Index(i), fmt.Sprintf("%s[%d]", name, i)); err != nil {
				return err
			}
		}
		f.Set(s)
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return wrong()
		}
		return decodeObject(obj, options(f), name+".")
	default:
		panic(fmt.Sprintf("optdecode: option %q has a field of type %s, which options cannot hold", name, t))
	}
	return nil
}

// integer is rv as an int64 if it is an integer: of an integer kind, or a
// float with no fraction (JSON's numbers).
func integer(rv reflect.Value) (int64, bool) {
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return int64(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		x := rv.Float()
		return int64(x), x == math.Trunc(x) && !math.IsInf(x, 0)
	}
	return 0, false
}

// fitsInt64 reports whether an integer value survived integer's conversion.
func fitsInt64(rv reflect.Value) bool {
	switch rv.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return rv.Uint() <= math.MaxInt64
	case reflect.Float32, reflect.Float64:
		return rv.Float() >= math.MinInt64 && rv.Float() < math.MaxInt64
	}
	return true
}

func number(rv reflect.Value) (float64, bool) {
	switch rv.Kind() {
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint()), true
	}
	return 0, false
}

// want says in words what a field of type t takes.
func want(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return want(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "a list of " + plural(t.Elem())
	case reflect.Struct:
		names := slices.Sorted(func(yield func(string) bool) {
			for f := range t.Fields() {
				if n := optionName(f); n != "" && !yield(n) {
					return
				}
			}
		})
		return "an object {" + strings.Join(names, ", ") + "}"
	}
	return t.String()
}

// plural names the values of a list's element type t.
func plural(t reflect.Type) string {
	switch w := want(t); {
	case strings.HasPrefix(w, "a list"), strings.HasPrefix(w, "an object"):
		return "(" + w + ")"
	case w == "true or false":
		return "true/false values"
	case strings.HasPrefix(w, "an "):
		return w[3:] + "s"
	case strings.HasPrefix(w, "a "):
		return w[2:] + "s"
	default:
		return w
	}
}

// describe shows a value as the spec would have spelled it.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case map[string]any:
		return "an object"
	}
	switch reflect.ValueOf(v).Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map:
		return "an object"
	}
	return fmt.Sprint(v)
}
