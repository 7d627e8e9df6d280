package client_test

import (
	"testing"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }
