package render

import (
	"errors"
	"testing"
)

// A certificate the browser refuses is told apart from other navigation
// failures, so a caller can suggest ignore-certificate-errors.
func TestNavigationErrorNamesCertificates(t *testing.T) {
	for _, tc := range []struct {
		text string
		cert bool
	}{
		{"net::ERR_CERT_AUTHORITY_INVALID", true},
		{"net::ERR_CERT_DATE_INVALID", true},
		{"net::ERR_CERT_COMMON_NAME_INVALID", true},
		{"net::ERR_CONNECTION_REFUSED", false},
		{"net::ERR_NAME_NOT_RESOLVED", false},
	} {
		err := navigationError("https://example.test/: "+tc.text, tc.text)
		if !errors.Is(err, ErrNavigation) {
			t.Errorf("%s: %v is not ErrNavigation", tc.text, err)
		}
		if got := errors.Is(err, ErrCertificate); got != tc.cert {
			t.Errorf("%s: errors.Is(ErrCertificate) = %v, want %v (%v)", tc.text, got, tc.cert, err)
		}
	}
}
