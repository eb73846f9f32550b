// Package masks decides where a frame of a page is masked: the rules of what is secret
// (a password or card field, what session-replay tools are told is private, the
// deployment's own attributes and classes), the reading of a DOMSnapshot.captureSnapshot
// result against them, what each secret paints beyond its box (ink.go), the placing of
// the secrets of frames of another process (frames.go), and the boxes of image pixels
// that cover them (boxes.go). It is plain geometry on plain data: the broker reads the
// page through Chromium and hands the bytes and numbers over; package jpegmask paints
// the boxes.
package masks

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// What is masked. An element is secret when it is
//   - a form control (input, textarea, select, or an element made editable with
//     contenteditable) whose autocomplete names a password, a one-time code or any
//     cc-* (payment card) field;
//   - an input or textarea whose type is password, or whose name, id, aria-label,
//     placeholder or label says it holds one (secretWords: a "show password" toggle
//     turns a password field into type=text and keeps its name);
//   - marked private for session-replay tools: one of Attributes (any value), one of
//     Classes, data-dd-privacy="mask", "hidden" or "mask-user-input",
//     data-clarity-mask="true", and the deployment's extra attributes and classes
//     (NewRules). Attribute and class names are
//     compared ASCII case-insensitively: a selector matches a class so in a quirks-mode
//     page, so this masks at least what each of those tools masks;
//   - an iframe whose allow attribute grants payment (how shops embed card entry).
//
// A secret element's descendants are secret too, and a document inside an iframe of
// the page's process that holds a secret masks the whole iframe of the top document.
// A frame of another process is read into by the broker and its secrets placed where it
// draws them (PlaceFrames).
var (
	// Attributes are the attributes that mark an element private, whatever their
	// value: rrweb/LogRocket, Hotjar, OpenReplay, Sentry, Smartlook, Heap and the
	// common data-sensitive.
	Attributes = []string{
		"data-private", "data-sensitive", "data-hj-suppress", "data-openreplay-masked",
		"data-sentry-block", "data-sentry-mask", "data-recording-sensitive",
		"data-recording-disable", "data-heap-redact-text",
	}
	// Classes are the classes that mark an element private: rrweb, FullStory,
	// PostHog, Sentry, LogRocket, Datadog and Heap.
	Classes = []string{
		"rr-block", "rr-mask", "fs-exclude", "fs-mask", "ph-no-capture", "sentry-block",
		"sentry-mask", "_lr-hide", "dd-privacy-mask", "dd-privacy-hidden",
		"dd-privacy-mask-user-input", "heap-ignore",
	}
)

// secretAutocomplete are the autocomplete tokens of secret fields, besides any cc-*.
var secretAutocomplete = []string{"current-password", "new-password", "one-time-code"}

// secretWords decide whether a text field's name, id, aria-label, placeholder or label
// says it holds a secret. The text is lower-cased; it is secret when it contains one of
// secretWords.within anywhere, or one of secretWords.whole as a word of its own (words
// split at every character that is not a letter or a digit, and between a lower-case
// and an upper-case letter: "userPwd" is "user pwd").
var secretWords = struct{ within, whole []string }{
	within: []string{
		"password", "passwd", "passphrase", "passcode", "onetime", "one-time", "one_time",
		"securitycode", "security-code", "security_code", "security code", "пароль",
	},
	whole: []string{"pass", "pwd", "pin", "otp", "cvc", "cvc2", "cvv", "cvv2", "csc", "cvn", "пин"},
}

// maskDDPrivacy are the values of data-dd-privacy that mask (Datadog).
var maskDDPrivacy = []string{"mask", "hidden", "mask-user-input"}

// notTextInputs are the input types that hold no typed text: a password rule by name
// never masks them (a "Show password" checkbox is not a secret).
var notTextInputs = []string{"hidden", "checkbox", "radio", "submit", "button", "reset", "image", "file", "range", "color"}

// Bounds of the deployment's extra mask names.
const (
	// MaxNames bounds the extra attributes, and the extra classes, of a deployment.
	MaxNames = 32
	// MaxNameBytes bounds one extra attribute or class name.
	MaxNameBytes = 128
)

// Rules is what a snapshot is matched against. Make it with NewRules.
type Rules struct {
	attributes []string // lower case
	classes    []string
	// opaqueFrames masks whole every frame element (frameElements) whose document
	// neither the snapshot nor a read into it (PlaceFrames) holds.
	opaqueFrames bool
}

// frameElements are the elements that draw another document.
var frameElements = []string{"iframe", "frame", "fencedframe", "object", "embed", "portal"}

// NewRules returns the built-in rules with the deployment's extra attributes and
// classes (names CheckName accepts, at most MaxNames of each; the broker's Config
// checks them). showOpaqueFrames leaves unmasked the frames whose document nobody read
// (an object or embed, a frame of another process the broker could not read into),
// which are otherwise masked whole, as they may hold a password or a card field.
func NewRules(attributes, classes []string, showOpaqueFrames bool) Rules {
	r := Rules{
		attributes:   slices.Clone(Attributes),
		classes:      slices.Clone(Classes),
		opaqueFrames: !showOpaqueFrames,
	}
	for _, a := range attributes {
		r.attributes = append(r.attributes, strings.ToLower(a))
	}
	r.classes = append(r.classes, classes...)
	return r
}

// CheckName refuses a name that may not be an extra attribute or class: it must be
// non-empty, at most MaxNameBytes, printable ASCII without whitespace, quotes, '=',
// '<', '>' or '/' (an attribute name or a class token, not a selector). The error
// quotes the name.
func CheckName(name string) error {
	if name == "" || len(name) > MaxNameBytes {
		return errName(name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\'' || c == '=' || c == '<' || c == '>' || c == '/' {
			return errName(name)
		}
	}
	return nil
}

// errName is the error for a name CheckName refuses.
func errName(name string) error {
	return fmt.Errorf("%q is not a name (printable ASCII, no space, quote, '=', '<', '>' or '/', at most %d bytes)", name, MaxNameBytes)
}

// ParseSwitch reads a deployment's AGENTFY_MASK: "on" masks (the default), "off"
// turns masking off (noMask, the broker's Config.NoMask); anything else is refused.
func ParseSwitch(v string) (noMask bool, err error) {
	switch v {
	case "on":
		return false, nil
	case "off":
		return true, nil
	}
	return false, fmt.Errorf("%q, want on or off", v)
}

// ParseNames reads a deployment's list of extra attribute or class names: comma
// separated, spaces around a name ignored. It refuses a name CheckName refuses and more
// than MaxNames names.
func ParseNames(list string) ([]string, error) {
	var names []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if err := CheckName(n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	if len(names) > MaxNames {
		return nil, fmt.Errorf("%d names, at most %d", len(names), MaxNames)
	}
	return names, nil
}

// isSecret reports whether an element is secret by its own name and attributes, or
// because a label says so (labelled); ok is false when an index is out of the string
// table.
func isSecret(nameIdx int, attrs []int, str func(int) (string, bool), rules Rules, labelled bool) (secret, ok bool) {
	name, ok := str(nameIdx)
	if !ok {
		return false, false
	}
	if len(attrs)%2 != 0 {
		return false, false
	}
	text := strings.EqualFold(name, "input") || strings.EqualFold(name, "textarea")
	control := text || strings.EqualFold(name, "select")
	iframe := strings.EqualFold(name, "iframe")
	named, notText := labelled, false
	for k := 0; k < len(attrs); k += 2 {
		a, ok1 := str(attrs[k])
		v, ok2 := str(attrs[k+1])
		if !ok1 || !ok2 {
			return false, false
		}
		a = strings.ToLower(a)
		if a == "contenteditable" && !strings.EqualFold(strings.TrimSpace(v), "false") {
			control = true
		}
	}
	for k := 0; k < len(attrs); k += 2 {
		a, _ := str(attrs[k])
		v, _ := str(attrs[k+1])
		a = strings.ToLower(a)
		switch {
		case slices.Contains(rules.attributes, a):
			secret = true
		case a == "class":
			for _, c := range strings.Fields(v) {
				if slices.ContainsFunc(rules.classes, func(m string) bool { return strings.EqualFold(c, m) }) {
					secret = true
				}
			}
		case a == "data-dd-privacy":
			secret = secret || slices.Contains(maskDDPrivacy, strings.ToLower(strings.TrimSpace(v)))
		case a == "data-clarity-mask":
			secret = secret || strings.EqualFold(strings.TrimSpace(v), "true")
		case text && a == "type":
			t := strings.ToLower(strings.TrimSpace(v))
			secret = secret || t == "password"
			notText = slices.Contains(notTextInputs, t)
		case text && (a == "name" || a == "id" || a == "aria-label" || a == "placeholder"):
			named = named || saysSecret(v)
		case control && a == "autocomplete":
			for _, t := range strings.Fields(strings.ToLower(v)) {
				if strings.HasPrefix(t, "cc-") || slices.Contains(secretAutocomplete, t) {
					secret = true
				}
			}
		case iframe && a == "allow":
			for _, directive := range strings.Split(v, ";") {
				if f := strings.Fields(directive); len(f) > 0 && strings.EqualFold(f[0], "payment") {
					secret = true
				}
			}
		}
	}
	return secret || (text && named && !notText), true
}

// saysSecret reports whether a field's name, id, aria-label, placeholder or label text
// says it holds a secret (secretWords).
func saysSecret(v string) bool {
	if len(v) > maxLabelBytes {
		v = v[:maxLabelBytes]
	}
	// Split camelCase before lower-casing: "userPwd" is "user Pwd".
	var b strings.Builder
	prevLower := false
	for _, r := range v {
		if prevLower && unicode.IsUpper(r) {
			b.WriteByte(' ')
		}
		prevLower = unicode.IsLower(r)
		b.WriteRune(r)
	}
	lower := strings.ToLower(b.String())
	for _, w := range secretWords.within {
		if strings.Contains(lower, w) {
			return true
		}
	}
	for _, w := range strings.FieldsFunc(lower, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if slices.Contains(secretWords.whole, w) {
			return true
		}
	}
	return false
}

// maxLabelBytes bounds the text of a label (or a name) read for saysSecret.
const maxLabelBytes = 256

// Marks returns the attributes and classes that mark an element private under r, the
// deployment's own included.
func (r Rules) Marks() (attributes, classes []string) {
	return slices.Clone(r.attributes), slices.Clone(r.classes)
}
