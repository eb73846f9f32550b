package broker

import (
	"slices"
	"testing"
)

func TestTabOrder(t *testing.T) {
	// Each op is one of "open X", "play X", "close X"; want is the selected
	// tab after all ops ("" for none) and list the open tabs, oldest first.
	tests := []struct {
		name string
		ops  []string
		want string
		list []string
	}{
		{name: "no tab", ops: nil, want: "", list: nil},
		{name: "last opened", ops: []string{"open a", "open b"}, want: "b", list: []string{"a", "b"}},
		{name: "played beats opened later", ops: []string{"open a", "open b", "play a", "open c"}, want: "a", list: []string{"a", "b", "c"}},
		{name: "most recent play", ops: []string{"open a", "open b", "play a", "play b"}, want: "b", list: []string{"a", "b"}},
		{name: "replay moves to front", ops: []string{"open a", "open b", "play a", "play b", "play a"}, want: "a", list: []string{"a", "b"}},
		{name: "closed played falls back to previous play", ops: []string{"open a", "open b", "open c", "play a", "play b", "close b"}, want: "a", list: []string{"a", "c"}},
		{name: "all played closed falls back to last opened", ops: []string{"open a", "open b", "open c", "play a", "close a"}, want: "c", list: []string{"b", "c"}},
		{name: "last opened closed", ops: []string{"open a", "open b", "close b"}, want: "a", list: []string{"a"}},
		{name: "everything closed", ops: []string{"open a", "play a", "close a"}, want: "", list: nil},
		{name: "open twice is one tab", ops: []string{"open a", "open b", "open a"}, want: "b", list: []string{"a", "b"}},
		{name: "play unknown is ignored", ops: []string{"open a", "play z"}, want: "a", list: []string{"a"}},
		{name: "late open after close is ignored", ops: []string{"open a", "open b", "close b", "open b"}, want: "a", list: []string{"a"}},
		{name: "close twice", ops: []string{"open a", "close a", "close a"}, want: "", list: nil},
		{name: "play of closed is ignored", ops: []string{"open a", "open b", "close a", "play a"}, want: "b", list: []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newTabOrder()
			for _, op := range tt.ops {
				verb, id := op[:len(op)-2], op[len(op)-1:]
				switch verb {
				case "open":
					o.Opened(id)
				case "play":
					o.Played(id)
				case "close":
					o.Closed(id)
				default:
					t.Fatalf("bad op %q", op)
				}
			}
			got, ok := o.Selected()
			if ok != (tt.want != "") || got != tt.want {
				t.Errorf("Selected() = %q, %v; want %q", got, ok, tt.want)
			}
			if list := o.List(); !slices.Equal(list, tt.list) {
				t.Errorf("List() = %v, want %v", list, tt.list)
			}
			if o.Len() != len(tt.list) {
				t.Errorf("Len() = %d, want %d", o.Len(), len(tt.list))
			}
		})
	}
}

func TestTabOrderPlayedReportsUnknown(t *testing.T) {
	o := newTabOrder()
	o.Opened("a")
	if !o.Played("a") {
		t.Error("Played(live tab) = false")
	}
	if o.Played("b") {
		t.Error("Played(unknown tab) = true")
	}
	o.Closed("a")
	if o.Played("a") || o.Has("a") {
		t.Error("closed tab still known")
	}
}

func TestTabOrderForgetsBoundedly(t *testing.T) {
	o := newTabOrder()
	for i := range maxForgottenTabs * 3 {
		id := string(rune('a'+i%26)) + string(rune(i))
		o.Opened(id)
		o.Closed(id)
	}
	if len(o.gone) != maxForgottenTabs || len(o.goneQ) != maxForgottenTabs {
		t.Errorf("remembers %d/%d closed tabs, want at most %d", len(o.gone), len(o.goneQ), maxForgottenTabs)
	}
}
