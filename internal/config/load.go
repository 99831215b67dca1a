package config

import (
	"fmt"
	"os"
	"strings"

	"github.com/goccy/go-yaml"

	"reckon/deploy"
)

// Load reads the YAML file at path (the embedded default when path is
// empty), applies RECKON_* environment overrides from environ and the
// key=value overrides in sets, fills defaults, and validates.
func Load(path string, environ []string, sets []string) (*Config, error) {
	raw := deploy.DefaultConfig
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		raw = b
	}
	c, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	if err := applyEnv(c, environ); err != nil {
		return nil, err
	}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("config: --set %q: want key=value", s)
		}
		if err := Set(c, k, v); err != nil {
			return nil, err
		}
	}
	if c.Dev.Demo {
		c.Streams = append(c.Streams, c.Dev.DemoStreams...)
	}
	c.fillDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Parse decodes YAML strictly: unknown keys are errors, so a typo never
// silently falls back to a default.
func Parse(raw []byte) (c *Config, err error) {
	// goccy/go-yaml v1.19.2 panics on some malformed input (a bare "!" tag
	// where a list is expected, found by FuzzLoad): report it, never crash.
	defer func() {
		if p := recover(); p != nil {
			c, err = nil, fmt.Errorf("config: malformed YAML: the parser failed (%v)", p)
		}
	}()
	c = &Config{}
	if err := yaml.UnmarshalWithOptions(raw, c, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("config: %w", yamlError(err))
	}
	return c, nil
}
