package jpegmask

import (
	"errors"
	"image"
	"slices"
)

// Painting masks without decoding the frame. A baseline JPEG is a Huffman-coded
// stream of 8×8 blocks of quantised DCT coefficients; a block whose coefficients are
// all zero but the first (DC) is one flat colour. PaintDCT re-codes the stream as
// it is read: every block that touches a mask box — luma and chroma alike, so a chroma
// block covers 16×16 pixels of a 4:2:0 frame — becomes a flat block of the mask's grey
// (two greys, in diagonal stripes one block wide), and every other block is copied
// coefficient for coefficient, so the rest of the frame is bit for bit what Chromium
// encoded. No IDCT, no colour conversion, no second quantisation: the masks cost
// what reading and writing the entropy-coded data costs.
//
// Only what Chromium writes is taken: 8-bit baseline (SOF0), Huffman, one scan with
// every component, no restart interval, and Huffman tables that can code the mask's
// symbols. Anything else is errDCTUnsupported, and Paint decodes, paints and encodes
// the frame instead.

// errDCTUnsupported is a JPEG PaintDCT does not re-code.
var errDCTUnsupported = errors.New("jpeg: not a frame the masks re-code in the DCT domain")

// errDCTCorrupt is a JPEG whose data does not decode.
var errDCTCorrupt = errors.New("jpeg: corrupt entropy-coded data")

// huffTable is one Huffman table, for decoding (by code length) and encoding (by
// symbol).
type huffTable struct {
	// Decoding: for each length l, the first code, how many codes and the index of
	// the first in vals.
	minCode, count [17]int32
	first          [17]int
	vals           []byte
	// Encoding: the code and length of each symbol; length 0 for none.
	code [256]uint16
	size [256]uint8
	// lut decodes a code of at most lutBits bits at once: for each lutBits-bit
	// prefix, the symbol<<8 | its length; 0 when the code is longer.
	lut [1 << lutBits]uint16
}

// lutBits is how many bits the decoding lookup table reads at once.
const lutBits = 9

func newHuffTable(counts [16]byte, vals []byte) (*huffTable, error) {
	h := &huffTable{vals: vals}
	code, k := int32(0), 0
	for l := 1; l <= 16; l++ {
		n := int(counts[l-1])
		h.minCode[l], h.count[l], h.first[l] = code, int32(n), k //nolint:gosec // a count of 0–255
		for i := 0; i < n; i++ {
			if k >= len(vals) {
				return nil, errDCTCorrupt
			}
			h.code[vals[k]], h.size[vals[k]] = uint16(code), uint8(l)
			code++
			k++
		}
		if code > 1<<l {
			return nil, errDCTCorrupt
		}
		code <<= 1
	}
	for sym := range 256 {
		l := int(h.size[sym])
		if l == 0 || l > lutBits {
			continue
		}
		base := int(h.code[sym]) << (lutBits - l)
		for i := range 1 << (lutBits - l) {
			h.lut[base+i] = uint16(sym)<<8 | uint16(l) //nolint:gosec // a byte and a length ≤ 9
		}
	}
	return h, nil
}

// bitReader reads the entropy-coded segment, skipping the stuffed zero after 0xFF.
type bitReader struct {
	data []byte
	pos  int
	acc  uint32
	n    uint
	pad  uint // bits of padding in acc, past the data's end
}

func (r *bitReader) fill() error {
	for r.n <= 24 {
		if r.pos >= len(r.data) {
			return errDCTCorrupt
		}
		b := r.data[r.pos]
		if b == 0xFF {
			if r.pos+1 >= len(r.data) || r.data[r.pos+1] != 0 {
				// A marker: the data ended. Pad with ones, as decoders do; reading
				// into the padding is an error the caller sees as a short stream.
				r.acc |= 0xFF << (24 - r.n)
				r.n += 8
				r.pad += 8
				continue
			}
			r.pos++
		}
		r.pos++
		r.acc |= uint32(b) << (24 - r.n)
		r.n += 8
	}
	return nil
}

func (r *bitReader) bits(n uint) (uint32, error) {
	if n == 0 {
		return 0, nil
	}
	if r.n < n {
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	v := r.acc >> (32 - n)
	r.acc <<= n
	r.n -= n
	return v, nil
}

func (r *bitReader) decode(h *huffTable) (byte, error) {
	if r.n < lutBits {
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	if e := h.lut[r.acc>>(32-lutBits)]; e != 0 {
		l := uint(e & 0xFF)
		r.acc <<= l
		r.n -= l
		return byte(e >> 8), nil
	}
	code := int32(0)
	for l := 1; l <= 16; l++ {
		b, err := r.bits(1)
		if err != nil {
			return 0, err
		}
		code = code<<1 | int32(b) //nolint:gosec // one bit
		if c := h.count[l]; c > 0 && code-h.minCode[l] < c && code >= h.minCode[l] {
			return h.vals[h.first[l]+int(code-h.minCode[l])], nil
		}
	}
	return 0, errDCTCorrupt
}

// bitWriter writes an entropy-coded segment, stuffing a zero after each 0xFF.
type bitWriter struct {
	out []byte
	acc uint64 // the n bits not yet written, in its low bits
	n   uint
}

// put writes the n (≤ 32) low bits of v.
func (w *bitWriter) put(v uint32, n uint) {
	w.acc = w.acc<<n | uint64(v)&(1<<n-1)
	w.n += n
	for w.n >= 8 {
		w.n -= 8
		b := byte(w.acc >> w.n) //nolint:gosec // the byte above n
		w.out = append(w.out, b)
		if b == 0xFF {
			w.out = append(w.out, 0)
		}
	}
}

func (w *bitWriter) symbol(h *huffTable, s byte) bool {
	if h.size[s] == 0 {
		return false
	}
	w.put(uint32(h.code[s]), uint(h.size[s]))
	return true
}

// flush pads the last byte with ones.
func (w *bitWriter) flush() {
	if w.n > 0 {
		w.put(1<<(8-w.n)-1, 8-w.n)
	}
}

// category is the number of bits of v's magnitude (JPEG's SSSS).
func category(v int32) uint {
	if v < 0 {
		v = -v
	}
	n := uint(0)
	for v > 0 {
		n++
		v >>= 1
	}
	return n
}

// extend turns n received bits into a signed value (JPEG's EXTEND).
func extend(v uint32, n uint) int32 {
	if n == 0 {
		return 0
	}
	if v < 1<<(n-1) {
		return int32(v) - (1<<n - 1) //nolint:gosec // at most 11 bits
	}
	return int32(v) //nolint:gosec // at most 11 bits
}

// jpegComponent is one component of the frame and its scan.
type jpegComponent struct {
	id     byte
	h, v   int // sampling factors
	tq     int // quantisation table
	dc, ac *huffTable
}

// PaintDCT returns jpg with every block that touches a box (in image pixels) made a
// flat block of the mask, without decoding the frame (see above): the rest of the frame
// is bit for bit what the encoder wrote. It refuses, with an error, a JPEG it does not
// re-code (not 8-bit baseline Huffman with three components in one scan, a restart
// interval, tables that cannot code the mask) and one whose data does not decode;
// Paint falls back to decoding for those.
func PaintDCT(jpg []byte, boxes []image.Rectangle) ([]byte, error) {
	if len(jpg) < 4 || jpg[0] != 0xFF || jpg[1] != 0xD8 {
		return nil, errDCTUnsupported
	}
	var h jpegHeader
	pos := 2
	for {
		if pos+4 > len(jpg) || jpg[pos] != 0xFF {
			return nil, errDCTUnsupported
		}
		marker := jpg[pos+1]
		if marker == 0xFF { // fill byte
			pos++
			continue
		}
		length := int(jpg[pos+2])<<8 | int(jpg[pos+3])
		if length < 2 || pos+2+length > len(jpg) {
			return nil, errDCTUnsupported
		}
		seg := jpg[pos+4 : pos+2+length]
		var err error
		switch {
		case marker == 0xDB: // DQT
			err = h.readDQT(seg)
		case marker == 0xC4: // DHT
			err = h.readDHT(seg)
		case marker == 0xC0: // SOF0, baseline
			err = h.readSOF0(seg)
		case marker >= 0xC1 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC:
			return nil, errDCTUnsupported // progressive, lossless, arithmetic
		case marker == 0xDD: // DRI
			if len(seg) != 2 || seg[0] != 0 || seg[1] != 0 {
				return nil, errDCTUnsupported
			}
		case marker == 0xDA: // SOS
			if err := h.readSOS(seg); err != nil {
				return nil, err
			}
			start := pos + 2 + length
			out, err := recodeScan(jpg[start:], h.comps, h.quant, h.width, h.height, boxes)
			if err != nil {
				return nil, err
			}
			return append(append(slices.Clip(jpg[:start:start]), out...), 0xFF, 0xD9), nil
		}
		if err != nil {
			return nil, err
		}
		pos += 2 + length
	}
}

// jpegHeader is what PaintDCT reads of a JPEG's header segments.
type jpegHeader struct {
	quant     [4][64]uint16
	haveQuant [4]bool
	dcTables  [4]*huffTable
	acTables  [4]*huffTable
	comps     []jpegComponent
	width     int
	height    int
}

// readDQT reads a DQT segment: 8-bit quantisation tables.
func (h *jpegHeader) readDQT(seg []byte) error {
	for len(seg) > 0 {
		pq, tq := seg[0]>>4, seg[0]&15
		if pq != 0 || tq > 3 || len(seg) < 65 {
			return errDCTUnsupported
		}
		for i := range 64 {
			h.quant[tq][i] = uint16(seg[1+i])
		}
		h.haveQuant[tq] = true
		seg = seg[65:]
	}
	return nil
}

// readDHT reads a DHT segment: Huffman tables.
func (h *jpegHeader) readDHT(seg []byte) error {
	for len(seg) > 0 {
		if len(seg) < 17 {
			return errDCTUnsupported
		}
		tc, th := seg[0]>>4, seg[0]&15
		var counts [16]byte
		copy(counts[:], seg[1:17])
		total := 0
		for _, c := range counts {
			total += int(c)
		}
		if tc > 1 || th > 3 || len(seg) < 17+total {
			return errDCTUnsupported
		}
		t, err := newHuffTable(counts, slices.Clone(seg[17:17+total]))
		if err != nil {
			return errDCTUnsupported
		}
		if tc == 0 {
			h.dcTables[th] = t
		} else {
			h.acTables[th] = t
		}
		seg = seg[17+total:]
	}
	return nil
}

// readSOF0 reads a baseline frame header: 8-bit samples, three components.
func (h *jpegHeader) readSOF0(seg []byte) error {
	if len(seg) < 6 || seg[0] != 8 {
		return errDCTUnsupported
	}
	h.height, h.width = int(seg[1])<<8|int(seg[2]), int(seg[3])<<8|int(seg[4])
	n := int(seg[5])
	if n != 3 || len(seg) < 6+3*n || h.width == 0 || h.height == 0 {
		return errDCTUnsupported
	}
	for i := range n {
		c := seg[6+3*i:]
		h.comps = append(h.comps, jpegComponent{id: c[0], h: int(c[1] >> 4), v: int(c[1] & 15), tq: int(c[2])})
	}
	return nil
}

// readSOS reads the header of the one scan: the three components in frame order, each
// with its tables, sequential (the whole spectrum, no approximation), chroma not
// subsampled beyond 2×2.
func (h *jpegHeader) readSOS(seg []byte) error {
	comps := h.comps
	if len(comps) != 3 || len(seg) < 1 || int(seg[0]) != 3 || len(seg) < 1+2*3+3 {
		return errDCTUnsupported
	}
	for i := range 3 {
		id, tables := seg[1+2*i], seg[2+2*i]
		if comps[i].id != id {
			return errDCTUnsupported
		}
		comps[i].dc, comps[i].ac = h.dcTables[tables>>4&3], h.acTables[tables&3]
		if comps[i].dc == nil || comps[i].ac == nil || comps[i].tq > 3 || !h.haveQuant[comps[i].tq] ||
			comps[i].h < 1 || comps[i].h > 2 || comps[i].v < 1 || comps[i].v > 2 {
			return errDCTUnsupported
		}
	}
	if ss, se, a := seg[7], seg[8], seg[9]; ss != 0 || se != 63 || a != 0 {
		return errDCTUnsupported
	}
	if comps[1].h != 1 || comps[1].v != 1 || comps[2].h != 1 || comps[2].v != 1 {
		return errDCTUnsupported
	}
	return nil
}

// The mask's two greys as flat blocks: luma levels (maskDark, maskLight) and neutral
// chroma.
func flatDC(level uint8, q uint16) int32 {
	// A flat block of level L has DC = 8 × (L − 128); quantised, rounded.
	v := 8 * (int32(level) - 128)
	if v < 0 {
		return -((-v + int32(q)/2) / int32(q))
	}
	return (v + int32(q)/2) / int32(q)
}

// recodeScan re-codes the entropy-coded data of a baseline 3-component scan (its
// data up to the EOI marker).
func recodeScan(data []byte, comps []jpegComponent, quant [4][64]uint16, width, height int, boxes []image.Rectangle) ([]byte, error) {
	hmax, vmax := comps[0].h, comps[0].v
	mcuW, mcuH := 8*hmax, 8*vmax
	mcusX, mcusY := (width+mcuW-1)/mcuW, (height+mcuH-1)/mcuH
	// masked reports whether the block of component c at block (bx, by) of that
	// component's grid touches a box: it covers (8·hmax/h) × (8·vmax/v) pixels.
	masked := func(c *jpegComponent, bx, by int) bool {
		sx, sy := 8*hmax/c.h, 8*vmax/c.v
		x0, y0 := bx*sx, by*sy
		for _, b := range boxes {
			if x0 < b.Max.X && b.Min.X < x0+sx && y0 < b.Max.Y && b.Min.Y < y0+sy {
				return true
			}
		}
		return false
	}
	rc := scanRecoder{
		r:    &bitReader{data: data},
		w:    &bitWriter{out: make([]byte, 0, len(data)+len(data)/8)},
		dark: flatDC(maskDark, quant[comps[0].tq][0]), light: flatDC(maskLight, quant[comps[0].tq][0]),
	}
	for my := range mcusY {
		for mx := range mcusX {
			for ci := range comps {
				c := &comps[ci]
				for v := range c.v {
					for h := range c.h {
						bx, by := mx*c.h+h, my*c.v+v
						if err := rc.block(c, ci, masked(c, bx, by), (bx+by)/2%2 == 1); err != nil {
							return nil, err
						}
					}
				}
			}
		}
	}
	r, w := rc.r, rc.w
	// The stream must end where the data does: at most the last byte's padding left,
	// none of the padding read, and the end-of-image marker next.
	if r.n < r.pad || r.n-r.pad >= 8 || r.pos+2 > len(data) || data[r.pos] != 0xFF || data[r.pos+1] != 0xD9 {
		return nil, errDCTCorrupt
	}
	w.flush()
	return w.out, nil
}

// scanRecoder copies a scan block by block, re-coding the blocks under a mask flat.
type scanRecoder struct {
	r *bitReader
	w *bitWriter
	// prevIn and prevOut are each component's last DC as read and as written.
	prevIn, prevOut [3]int32
	// dark and light are the masks' two luma DCs.
	dark, light int32
}

// block copies the next block, of component c (index ci): as it is, or, under a mask,
// flat — the dark or (stripe) the light grey, neutral chroma, every AC zero.
func (rc *scanRecoder) block(c *jpegComponent, ci int, mask, stripe bool) error {
	r, w := rc.r, rc.w
	// The DC: the difference from the component's previous one.
	s, err := r.decode(c.dc)
	if err != nil {
		return err
	}
	if s > 11 {
		return errDCTCorrupt
	}
	bits, err := r.bits(uint(s))
	if err != nil {
		return err
	}
	dc := rc.prevIn[ci] + extend(bits, uint(s))
	out := dc
	if mask {
		out = 0 // neutral chroma
		if ci == 0 {
			out = rc.dark
			if stripe { // diagonal stripes two blocks wide
				out = rc.light
			}
		}
	}
	if out-rc.prevOut[ci] == dc-rc.prevIn[ci] {
		// The same difference: the same symbol and bits.
		if !w.symbol(c.dc, s) {
			return errDCTUnsupported
		}
		w.put(bits, uint(s))
	} else if !writeDC(w, c.dc, out-rc.prevOut[ci]) {
		return errDCTUnsupported // the tables cannot code it
	}
	rc.prevIn[ci], rc.prevOut[ci] = dc, out
	// The AC: copied symbol for symbol, or dropped for a flat block.
	for k := 1; k < 64; {
		rs, err := r.decode(c.ac)
		if err != nil {
			return err
		}
		run, size := int(rs>>4), uint(rs&15)
		if size == 0 && run != 15 {
			if !mask && !w.symbol(c.ac, rs) {
				return errDCTCorrupt
			}
			break // end of block
		}
		k += run + 1
		if k > 64 {
			return errDCTCorrupt
		}
		bits, err := r.bits(size)
		if err != nil {
			return err
		}
		if !mask {
			if !w.symbol(c.ac, rs) {
				return errDCTCorrupt
			}
			w.put(bits, size)
		}
	}
	if mask && !w.symbol(c.ac, 0x00) { // end of block: all AC zero
		return errDCTUnsupported
	}
	return nil
}

// writeDC Huffman-codes a DC difference; false when its symbol has no code.
func writeDC(w *bitWriter, h *huffTable, diff int32) bool {
	s := category(diff)
	if s > 11 || !w.symbol(h, byte(s)) {
		return false
	}
	if diff < 0 {
		diff += 1<<s - 1
	}
	w.put(uint32(diff), s) //nolint:gosec // non-negative, at most 11 bits
	return true
}
