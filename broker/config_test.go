package broker

import (
	"testing"

	"github.com/agentfy/agentfy/broker/masks"
)

// TestConfigMaskNames: a configuration with an extra mask class that is not a name
// (masks.CheckName), or with more than masks.MaxNames of them, is refused.
func TestConfigMaskNames(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaskClasses = []string{"ok", "not ok"}
	if err := cfg.validate(); err == nil {
		t.Fatal("a class with a space passed")
	}
	cfg.MaskClasses = make([]string, masks.MaxNames+1)
	for i := range cfg.MaskClasses {
		cfg.MaskClasses[i] = "c"
	}
	if err := cfg.validate(); err == nil {
		t.Fatalf("%d classes passed", masks.MaxNames+1)
	}
}
