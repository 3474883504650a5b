package clusterstatus

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// The apiserver's body is any bytes: the message quoting it is valid UTF-8
// cut on a character boundary, within maxMessage bytes.
func TestProbeAPIServerCutsTheBodyOnACharacter(t *testing.T) {
	for pad := range 3 {
		body := strings.Repeat("x", pad) + strings.Repeat("é", 1000)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(body))
		}))
		got := ProbeAPIServer(context.Background(), restClientFor(t, srv.URL))
		srv.Close()
		if !utf8.ValidString(got.Message) || len(got.Message) > maxMessage {
			t.Fatalf("pad %d: message of %d bytes (valid UTF-8: %v), want at most %d", pad, len(got.Message), utf8.ValidString(got.Message), maxMessage)
		}
	}
}
