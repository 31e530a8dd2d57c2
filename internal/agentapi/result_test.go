package agentapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// withError is r failed with msg.
func withError(r Result, msg string, terminal bool) Result {
	r.Error, r.Terminal = msg, terminal
	return r
}

// TestResultEncoding: what an agent writes, ParseResult reads back, as the
// controller does from the termination message; a long error is cut to
// the kubelet's 4096 bytes.
func TestResultEncoding(t *testing.T) {
	full := Result{
		Op:       OpBackup,
		Artifact: &Artifact{URI: "s3://b/k.db.zst", SizeBytes: 10, SHA256: strings.Repeat("a", 64), Compression: "Zstd"},
		Snapshot: &Snapshot{Member: "c-0", Revision: 42, EtcdVersion: "3.6.16", DBSizeBytes: 100},
	}
	verified := Result{Op: OpVerify, Verification: &Verification{Revision: 42, Keys: 3, Hash: 7, LiveHash: 7, LiveKeys: 3, Matches: true, LiveMember: "c-0", DurationSeconds: 9}}
	tests := []struct {
		name   string
		result Result
		want   string // a piece of the JSON
	}{
		{name: "a backup", result: full, want: `"artifact":{"uri":"s3://b/k.db.zst","sizeBytes":10,`},
		{name: "a verification", result: verified, want: `"liveMember":"c-0"`},
		{name: "a failure", result: Result{Op: OpFetch, Error: "x: checksum mismatch", Terminal: true}, want: `"terminal":true`},
		{name: "a failure with a long error", result: Result{Op: OpDelete, Error: strings.Repeat("e", 10000)}, want: `…"`},
		{name: "an install", result: Result{Op: OpInstall}, want: `{"op":"install"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			b, err := tt.result.Encode()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(len(b)).To(BeNumerically("<=", 4096))
			g.Expect(string(b)).To(ContainSubstring(tt.want))
			got, err := ParseResult(string(b)+"\n", tt.result.Op)
			g.Expect(err).NotTo(HaveOccurred())
			if len(tt.result.Error) < 4000 {
				g.Expect(got).To(Equal(tt.result))
			} else {
				g.Expect(got.Terminal).To(Equal(tt.result.Terminal))
				g.Expect(strings.HasSuffix(got.Error, "…")).To(BeTrue())
			}
			_, err = ParseResult(string(b), "another-op")
			g.Expect(err).To(MatchError(ErrNoResult))
		})
	}
}

// TestResultEncodingCutsOnCharacters: a long error of characters that take
// several bytes, in UTF-8 or once JSON escapes them, is cut on a character
// boundary, so that the encoded result, not the error, fits the kubelet's
// 4096 bytes, and ParseResult reads it back. A cut in the middle of a
// character would become \ufffd (6 bytes), and the kubelet would truncate
// the message; a cut by the error's bytes would drop far too much of an
// error that JSON escapes.
func TestResultEncodingCutsOnCharacters(t *testing.T) {
	texts := []struct {
		name string
		text string
	}{
		{name: "é (2 bytes)", text: strings.Repeat("é", 4000)},
		{name: "€ (3 bytes)", text: strings.Repeat("€", 3000)},
		{name: "emoji (4 bytes)", text: strings.Repeat("😀", 2000)},
		{name: "< (escaped to 6 bytes)", text: strings.Repeat("<", 5000)},
		{name: "quotes (escaped to 2 bytes)", text: strings.Repeat(`"`, 5000)},
		{name: "control characters (escaped to 6 bytes)", text: strings.Repeat("\x01", 5000)},
		{name: "line separators (3 bytes, escaped to 6)", text: strings.Repeat("\u2028", 3000)},
		{name: "invalid UTF-8 (1 byte, written as 6)", text: strings.Repeat("\xff", 5000)},
		{name: "a mix", text: strings.Repeat("aé€😀<\"\x01\n\xff&", 700)},
	}
	backup := Result{
		Op:       OpBackup,
		Artifact: &Artifact{URI: "s3://b/k.db.zst", SizeBytes: 10, SHA256: strings.Repeat("a", 64), Compression: "Zstd"},
		Snapshot: &Snapshot{Member: "c-0", Revision: 42, EtcdVersion: "3.6.16", DBSizeBytes: 100},
	}
	type testCase struct {
		name   string
		result Result
	}
	var tests []testCase
	for _, tx := range texts {
		// Shifting the text by 0 to 3 bytes puts every byte of its
		// characters at the limit.
		for shift := range 4 {
			tests = append(tests, testCase{
				name:   fmt.Sprintf("%s, shifted by %d", tx.name, shift),
				result: Result{Op: OpDelete, Error: strings.Repeat("x", shift) + tx.text},
			})
		}
		tests = append(tests, testCase{name: tx.name + ", after a backup's result", result: withError(backup, tx.text, false)})
		short := string([]rune(tx.text)[:100])
		tests = append(tests, testCase{name: tx.name + ", short enough", result: Result{Op: OpFetch, Error: "x: checksum mismatch: " + short, Terminal: true}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			b, err := tt.result.Encode()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(len(b)).To(BeNumerically("<=", MaxMessage))
			got, err := ParseResult(string(b), tt.result.Op)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Terminal).To(Equal(tt.result.Terminal))

			// What JSON makes of the whole error: invalid bytes become
			// U+FFFD.
			whole, err := json.Marshal(tt.result)
			g.Expect(err).NotTo(HaveOccurred())
			var want Result
			g.Expect(json.Unmarshal(whole, &want)).To(Succeed())
			if len(whole) <= MaxMessage {
				g.Expect(string(b)).To(Equal(string(whole)))
				g.Expect(got).To(Equal(want))
				return
			}
			kept, cut := strings.CutSuffix(got.Error, "…")
			g.Expect(cut).To(BeTrue(), "a cut error ends with …")
			g.Expect(kept).NotTo(BeEmpty())
			g.Expect(strings.HasPrefix(want.Error, kept)).To(BeTrue(), "the error is cut, not changed")
			// No more is cut than needed: one more character, at most 6
			// bytes once encoded, would not fit.
			g.Expect(len(b)).To(BeNumerically(">", MaxMessage-6))
			got.Error, want.Error = "", ""
			g.Expect(got).To(Equal(want))
		})
	}
}
