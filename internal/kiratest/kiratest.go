// Package kiratest is what Kira's tests share besides a real etcd (etcdtest):
// waiting for a condition with a deadline and receiving with a timeout, so
// that no test sleeps to synchronise or blocks forever on a bare receive;
// and a CA that issues the TLS certificates a test needs.
package kiratest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PollEvery is how often Poll and WaitUntil check their condition.
const PollEvery = 20 * time.Millisecond

// Poll checks cond every PollEvery until it holds (true) or within has
// passed (false).
func Poll(within time.Duration, cond func() bool) bool {
	return PollEach(within, PollEvery, cond)
}

// PollEach is Poll checking every every: for a condition that costs a
// read of etcd or of a process (the chaos suite's, every 100 ms).
func PollEach(within, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
	return true
}

// WaitUntil fails the test unless cond holds within the given time; what
// says what was awaited.
func WaitUntil(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	if !Poll(within, cond) {
		t.Fatalf("timed out after %s waiting for %s", within, what)
	}
}

// Receive returns the next value from ch, or fails the test if none comes
// within the given time. A closed channel yields T's zero value at once, as
// a plain receive would.
func Receive[T any](t testing.TB, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %s waiting for %s", within, what)
		var zero T
		return zero
	}
}

// CA issues TLS certificates for one test.
type CA struct {
	dir  string
	name string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	File string // the CA's certificate, PEM
}

// NewCA makes a CA whose certificate is written to dir/name.pem (File).
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{dir: dir, name: name, cert: cert, key: key, File: filepath.Join(dir, name+".pem")}
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Issue writes a certificate for cn (a server's for 127.0.0.1 when server)
// and its key, and returns their paths.
func (ca *CA) Issue(t testing.TB, cn string, server bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(ca.dir, ca.name+"-"+cn+".pem"), filepath.Join(ca.dir, ca.name+"-"+cn+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}
