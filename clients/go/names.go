package memsvc

// This file owns plain names for the contract's enums: "keyword" for MATCH_KEYWORD, "user" for
// ROLE_USER, read from the generated descriptors, so a value the contract gains needs no code
// here. It must never make calls.

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"memsvc.dev/clients/go/memsvcv1"
)

// Enum is a generated memsvc enum type (memsvcv1.Role, memsvcv1.Match, memsvcv1.TimeRange,
// memsvcv1.ResetMode, memsvcv1.Outcome, ...).
type Enum interface {
	~int32
	protoreflect.Enum
}

func prefix(enum protoreflect.EnumDescriptor) string {
	var out strings.Builder
	name := string(enum.Name())
	for i, r := range name {
		if i > 0 && r >= 'A' && r <= 'Z' && !(name[i-1] >= 'A' && name[i-1] <= 'Z') {
			out.WriteByte('_')
		}
		out.WriteRune(r)
	}
	return strings.ToUpper(out.String()) + "_"
}

// Named returns the enum value of a plain name: Named[memsvcv1.Match]("keyword") is
// MATCH_KEYWORD; the full name and "" (unspecified) are accepted too.
func Named[E Enum](name string) (E, error) {
	var zero E
	enum := zero.Descriptor()
	if name == "" {
		return zero, nil
	}
	wanted := strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(name), "-", "_"))
	for _, candidate := range []string{prefix(enum) + wanted, wanted} {
		if value := enum.Values().ByName(protoreflect.Name(candidate)); value != nil {
			return E(value.Number()), nil
		}
	}
	return zero, fmt.Errorf("memsvc: %s must be one of %s, got %q", enum.Name(),
		strings.Join(Names[E](), ", "), name)
}

// Label is the plain name of an enum value: "keyword" for MATCH_KEYWORD, "" for unspecified.
func Label[E Enum](value E) string {
	enum := value.Descriptor()
	found := enum.Values().ByNumber(protoreflect.EnumNumber(value))
	if found == nil {
		return fmt.Sprintf("unknown_%d", int32(value))
	}
	if strings.HasSuffix(string(found.Name()), "_UNSPECIFIED") {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(string(found.Name()), prefix(enum)))
}

// Names lists the plain names of an enum's values, unspecified left out.
func Names[E Enum]() []string {
	var zero E
	values := zero.Descriptor().Values()
	names := []string{}
	for i := 0; i < values.Len(); i++ {
		if label := Label(E(values.Get(i).Number())); label != "" {
			names = append(names, label)
		}
	}
	return names
}

// Msg is a message to append, its role given by name ("user", "assistant").
func Msg(role, content string) (*memsvcv1.Message, error) {
	number, err := Named[memsvcv1.Role](role)
	if err != nil {
		return nil, err
	}
	return &memsvcv1.Message{Role: number, Content: content}, nil
}
