package transport

import (
	"reflect"
	"slices"
	"testing"

	"felix/proto"
)

// The dialler reuses its read buffer after the answers of scalarAnswerKinds: their messages
// must hold no slice, string, pointer, map or interface, or a later frame would overwrite an
// answer a caller still holds.
func TestScalarAnswersHoldNoBytes(t *testing.T) {
	msgs := []proto.InternalMessage{&proto.ForwardPublishOk{}, &proto.ForwardPublishDuplicate{},
		&proto.ForwardPublishError{}, &proto.ForwardCacheError{}, &proto.ReplicateOk{}, &proto.ReplicateError{},
		&proto.UnsupportedKind{}, &proto.FenceOk{}, &proto.FencePositionOk{}, &proto.InternalError{}}
	var kinds []proto.Kind
	for _, m := range msgs {
		kinds = append(kinds, m.Kind())
		if path := referenceIn(reflect.TypeOf(m).Elem(), ""); path != "" {
			t.Errorf("%v answers hold a reference (%s): not a scalar answer", m.Kind(), path)
		}
		if !scalarAnswer(m.Kind()) {
			t.Errorf("%v not listed", m.Kind())
		}
	}
	for _, k := range scalarAnswerKinds {
		if !slices.Contains(kinds, k) {
			t.Errorf("listed kind %v has no type check here", k)
		}
	}
	for _, k := range []proto.Kind{proto.KindHelloOk, proto.KindForwardCacheOk, proto.KindNotLeader, 999} {
		if scalarAnswer(k) {
			t.Errorf("%v listed as scalar", k)
		}
	}
}

// referenceIn names the first field of t (recursively) that can refer to memory, "" if none.
func referenceIn(t reflect.Type, path string) string {
	switch t.Kind() {
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if p := referenceIn(t.Field(i).Type, path+"."+t.Field(i).Name); p != "" {
				return p
			}
		}
		return ""
	case reflect.Array:
		return referenceIn(t.Elem(), path+"[]")
	case reflect.Slice, reflect.String, reflect.Pointer, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return path + " " + t.Kind().String()
	}
	return ""
}
