package wire

import (
	"bytes"
	"encoding/base64"
	"errors"
	"image"
	_ "image/jpeg" // DecodeConfig reads JPEG headers
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits and layout of a page, the plaintext the broker seals for the requesting
// replica: exactly `null` (no tab) or {url, title, capturedAt, contentType, data} and,
// when the broker masked regions of the frame, a member masked, followed, when it
// masked the frame whole, by a last member hidden that says why.
const (
	// MaxFrameBytes bounds the JPEG.
	MaxFrameBytes = 4 << 20 // 4 MiB
	// MaxURLBytes and MaxTitleBytes bound the tab's URL and title; the broker shortens
	// longer ones on a character boundary.
	MaxURLBytes   = 16 << 10 // 16 KiB
	MaxTitleBytes = 4 << 10  // 4 KiB
	// MaxFrameWidth and MaxFrameHeight bound the JPEG's size in pixels. The broker
	// captures at most MaxFrameHeight CSS pixels of the viewport, scaled to at most
	// MaxFrameWidth image pixels across and never more than one image pixel per CSS
	// pixel.
	MaxFrameWidth  = 1280 // px
	MaxFrameHeight = 2000 // px
	// MaxMasked bounds a page's count of masked regions: the broker clamps its count to
	// it, so a larger one never comes from a broker.
	MaxMasked = 10000
	// MaxPlaintextBytes bounds a page's JSON: the JPEG in base64, room for the URL and
	// title even if every byte of them were escaped (\u00XX), and 256 bytes for the
	// rest (the names, the timestamp, the content type, masked and hidden: 140 bytes
	// with the largest count and the longest reason).
	MaxPlaintextBytes = 4*((MaxFrameBytes+2)/3) + 6*(MaxURLBytes+MaxTitleBytes) + 256
	// MaxSealedBytes bounds a sealed page on the wire, {"envelope":{…}}: the ciphertext
	// in base64 and the keys, IV and tag in hex. It is the largest NATS message of a
	// view, so the NATS server's max_payload must be at least this; a replica checks it
	// at start, and a test checks the chain up to the channel's message bound.
	MaxSealedBytes = 4*((MaxPlaintextBytes+2)/3) + 512
	// CapturedAtLayout is capturedAt's layout: UTC with milliseconds and a Z.
	CapturedAtLayout = "2006-01-02T15:04:05.000Z"
	// ContentTypeJPEG is the media type of every frame.
	ContentTypeJPEG = "image/jpeg"
)

// Page is one frame of the agent's current tab as the requesting replica reads it. Data
// stays the base64 text the broker sealed: ParsePage validates it by decoding, and it is
// passed on without re-encoding.
type Page struct {
	URL         string `json:"url"`
	Title       string `json:"title"`
	CapturedAt  string `json:"capturedAt"`
	ContentType string `json:"contentType"`
	Data        string `json:"data"`
	// Masked is how many regions of the frame the broker painted over with opaque masks
	// before sealing it (password, payment and one-time-code fields, regions a site
	// marks private), at most MaxMasked. The broker writes it last, after data, and
	// only when it is more than 0.
	Masked int `json:"masked,omitempty"`
	// Hidden says why the broker masked the frame whole, one of the Hidden* reasons,
	// when it did; absent when the frame shows the page (with its secrets masked, or
	// none). It comes with Masked, after it.
	Hidden string `json:"hidden,omitempty"`
}

// Why a frame is masked whole: the broker could not place its masks on where the
// secrets were painted, and hides everything rather than guess (docs/privacy-masks.md).
const (
	// HiddenMotion: the page moved a secret while it was captured in a way no mask
	// followed (a frame of another process, a secret's ink, a scroll between reads
	// that kept disagreeing).
	HiddenMotion = "motion"
	// HiddenChanged: a secret appeared or left the page while it was captured.
	HiddenChanged = "changed"
	// HiddenViewTransition: a view transition ran, painting images of the page as it
	// was, which no read holds.
	HiddenViewTransition = "view_transition"
	// HiddenInk: a secret's ink cannot be placed at all (an SVG filter, a 3-D
	// perspective, a shadow a screen away, a style the broker cannot read).
	HiddenInk = "ink"
)

// HiddenReasons are the values of Page.Hidden, in the order the docs list them.
var HiddenReasons = []string{HiddenMotion, HiddenChanged, HiddenViewTransition, HiddenInk}

// ErrInvalidPage is the one error for a plaintext that is not a valid page, and for a
// capture that is not a valid frame: which check failed is not said.
var ErrInvalidPage = errors.New("wire: invalid page")

// JPEG returns the frame Data holds in base64, or nil if Data is not strict standard
// base64 (ParsePage refuses such a page).
func (p *Page) JPEG() []byte {
	b, err := base64.StdEncoding.Strict().DecodeString(p.Data)
	if err != nil {
		return nil
	}
	return b
}

// JPEGBytes is the size of the frame Data holds, read from Data's length and padding
// without decoding it.
func (p *Page) JPEGBytes() int {
	return base64.StdEncoding.DecodedLen(len(p.Data)) - strings.Count(p.Data[max(0, len(p.Data)-2):], "=")
}

// FormatCapturedAt formats t as capturedAt.
func FormatCapturedAt(t time.Time) string { return t.UTC().Format(CapturedAtLayout) }

// ParsePage validates a decrypted plaintext: exactly `null` (no tab, a nil page) or a
// page with exactly the five fields url, title, capturedAt, contentType and data, and
// optionally masked and hidden; a UTC millisecond timestamp, content type image/jpeg, a
// URL and title of valid UTF-8 within their bounds, strict standard base64 of a frame
// CheckFrame accepts, a masked count, when there is one, written as a JSON integer
// from 0 to MaxMasked, and a hidden reason, when there is one, written as a JSON string
// that is one of HiddenReasons, on a page whose masked is at least 1. A masked member
// that is null, a string, a fraction, an exponent, out of range or given twice makes
// the page invalid; so does a hidden member that is null, not a string, not a known
// reason, given twice, or given without a masked count of at least 1.
//
// An unknown reason is refused like a member the contract does not name: a broker that
// says a new reason needs replicas that know it first (until then its whole-masked
// frames are 503, never shown with a reason no viewer's client was written for).
func ParsePage(b []byte) (*Page, error) {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil, nil
	}
	p, err := decodePage(b)
	if err != nil {
		return nil, ErrInvalidPage
	}
	if p.ContentType != ContentTypeJPEG || len(p.URL) > MaxURLBytes || len(p.Title) > MaxTitleBytes ||
		!utf8.ValidString(p.URL) || !utf8.ValidString(p.Title) {
		return nil, ErrInvalidPage
	}
	if p.Masked < 0 || p.Masked > MaxMasked {
		return nil, ErrInvalidPage
	}
	if p.Hidden != "" && (p.Masked < 1 || !slices.Contains(HiddenReasons, p.Hidden)) {
		return nil, ErrInvalidPage
	}
	if _, err := time.Parse(CapturedAtLayout, p.CapturedAt); err != nil {
		return nil, ErrInvalidPage
	}
	if base64.StdEncoding.DecodedLen(len(p.Data)) > MaxFrameBytes+3 {
		return nil, ErrInvalidPage
	}
	// The JPEG is decoded only to be checked, into a buffer lent for the moment.
	bp := Scratch()
	defer Release(bp)
	jpg, err := base64.StdEncoding.Strict().AppendDecode(*bp, []byte(p.Data))
	*bp = jpg
	if err != nil {
		return nil, ErrInvalidPage
	}
	if err := CheckFrame(jpg); err != nil {
		return nil, err
	}
	return &p, nil
}

// decodePage is DecodeStrict with masked read by maskedCount and hidden by
// hiddenReason.
func decodePage(b []byte) (Page, error) {
	var s struct {
		Page
		Masked maskedCount  `json:"masked"` // shadows Page.Masked
		Hidden hiddenReason `json:"hidden"` // shadows Page.Hidden
	}
	if err := DecodeStrict(b, &s); err != nil {
		return Page{}, err
	}
	s.Page.Masked = int(s.Masked)
	s.Page.Hidden = string(s.Hidden)
	return s.Page, nil
}

// maskedCount is the page's masked, stricter than an int field, which would take null
// as 0: a number of JSON's integer form is the count; null, a fraction, an exponent or
// a string is refused. (DecodeStrict refuses a member given twice.)
type maskedCount int

// UnmarshalJSON reads the masked member: b is a JSON value the decoder has checked.
func (m *maskedCount) UnmarshalJSON(b []byte) error {
	n, err := strconv.Atoi(string(b))
	if err != nil {
		return ErrInvalidPage
	}
	*m = maskedCount(n)
	return nil
}

// hiddenReason is the page's hidden, stricter than a string field, which would take
// null as no member at all: a JSON string other than "" is the reason (ParsePage checks
// that it is one of HiddenReasons); null, "", a number, a boolean, an array or an object
// is refused. (DecodeStrict refuses a member given twice.)
type hiddenReason string

// UnmarshalJSON reads the hidden member: b is a JSON value the decoder has checked.
func (h *hiddenReason) UnmarshalJSON(b []byte) error {
	var s string
	if len(b) == 0 || b[0] != '"' || DecodeStrict(b, &s) != nil || s == "" {
		return ErrInvalidPage
	}
	*h = hiddenReason(s)
	return nil
}

// CheckFrame checks a JPEG the way the requesting replica does: at most MaxFrameBytes,
// the markers FF D8 FF … FF D9, and a JPEG header of at least 1×1 and at most
// MaxFrameWidth × MaxFrameHeight pixels. The broker checks its capture with it before
// sealing, so a frame the replica would refuse is never carried that far.
func CheckFrame(jpg []byte) error {
	if len(jpg) > MaxFrameBytes || len(jpg) < 5 {
		return ErrInvalidPage
	}
	if !bytes.HasPrefix(jpg, []byte{0xFF, 0xD8, 0xFF}) || !bytes.HasSuffix(jpg, []byte{0xFF, 0xD9}) {
		return ErrInvalidPage
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(jpg))
	if err != nil || format != "jpeg" || cfg.Width < 1 || cfg.Height < 1 || cfg.Width > MaxFrameWidth || cfg.Height > MaxFrameHeight {
		return ErrInvalidPage
	}
	return nil
}
