package config

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// EnvConfigPath names the environment variable holding the config file path.
const EnvConfigPath = "RECKON_CONFIG"

// EnvTestPrefix marks variables reserved for reckon's tests (e.g.
// RECKON_TEST_TEMPORAL_BIN); the config ignores them. Every other unknown
// RECKON_ variable is an error.
const EnvTestPrefix = "RECKON_TEST_"

// Keys lists every scalar key that RECKON_* variables and --set can
// override, in dotted form (kafka.brokers, gate.max_future_skew, ...). Lists
// of structs (streams) and maps (gate.types) are file-only.
func Keys() []string {
	var keys []string
	walk(reflect.TypeOf(Config{}), "", func(path string, _ []int) { keys = append(keys, path) })
	sort.Strings(keys)
	return keys
}

// KeyDoc returns the one-line description of key: the first sentence of
// its field's doc comment (keys_doc.go, generated from the comments by
// `go test ./internal/config -run TestKeyDocs -update`), or "" for an
// unknown key.
func KeyDoc(key string) string { return keyDocs[key] }

// Get returns key's value in c as Set takes it: lists comma separated,
// durations in Go syntax. Secrets are redacted. It reports false for an
// unknown key.
func Get(c *Config, key string) (string, bool) {
	var index []int
	walk(reflect.TypeOf(Config{}), "", func(path string, idx []int) {
		if path == key {
			index = idx
		}
	})
	if index == nil {
		return "", false
	}
	v := reflect.ValueOf(c).Elem().FieldByIndex(index)
	switch x := v.Interface().(type) {
	case time.Duration:
		return x.String(), true
	case []string:
		return strings.Join(x, ","), true
	case Secret:
		return x.String(), true
	}
	return fmt.Sprint(v.Interface()), true
}

// EnvName is the environment variable that overrides key.
func EnvName(key string) string {
	return "RECKON_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

func walk(t reflect.Type, prefix string, fn func(path string, index []int)) {
	var rec func(t reflect.Type, prefix string, index []int)
	rec = func(t reflect.Type, prefix string, index []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			path := tag
			if prefix != "" {
				path = prefix + "." + tag
			}
			idx := append(append([]int(nil), index...), i)
			switch {
			case f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)):
				rec(f.Type, path, idx)
			case settable(f.Type):
				fn(path, idx)
			}
		}
	}
	rec(t, prefix, nil)
}

func settable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64, reflect.Float64:
		return true
	case reflect.Slice:
		return t.Elem().Kind() == reflect.String
	}
	return false
}

// Set overrides one dotted key with a string value (lists are comma
// separated, durations use Go syntax like 90s).
func Set(c *Config, key, value string) error {
	var index []int
	walk(reflect.TypeOf(Config{}), "", func(path string, idx []int) {
		if path == key {
			index = idx
		}
	})
	if index == nil {
		return fmt.Errorf("config: unknown key %q (see `reckon config keys`)", key)
	}
	v := reflect.ValueOf(c).Elem().FieldByIndex(index)
	if err := setValue(v, value); err != nil {
		return fmt.Errorf("config: %s: %w", key, err)
	}
	return nil
}

func setValue(v reflect.Value, s string) error {
	if v.Type() == reflect.TypeOf(time.Duration(0)) {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		v.SetInt(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		v.SetFloat(f)
	case reflect.Slice:
		var parts []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		v.Set(reflect.ValueOf(parts))
	default:
		return fmt.Errorf("cannot set %s", v.Type())
	}
	return nil
}

// applyEnv applies RECKON_* variables. An unknown RECKON_ variable is an
// error so a typo does not silently leave a default in place.
func applyEnv(c *Config, environ []string) error {
	byEnv := map[string]string{}
	for _, k := range Keys() {
		byEnv[EnvName(k)] = k
	}
	var errs []string
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, "RECKON_") || name == EnvConfigPath || strings.HasPrefix(name, EnvTestPrefix) {
			continue
		}
		key, known := byEnv[name]
		if !known {
			errs = append(errs, fmt.Sprintf("config: unknown environment variable %s", name))
			continue
		}
		if err := Set(c, key, val); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}
