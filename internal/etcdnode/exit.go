package etcdnode

import (
	"fmt"
	"io"
	"strings"

	"go.etcd.io/etcd/client/pkg/v3/logutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcdLogger is etcd's logger for c: etcd's own configuration at
// c.LogLevel, or, when c.Quiet, only the entries etcd logs as it stops the
// process (fatal, panic), which nothing else would report: etcd exits right
// after, taking kira run with its embedded etcd along. Either way such an
// entry is followed by a line saying, in plain words, that etcd stops and
// why: a full disk (etcd exits on a write that finds no space) names the
// fix. Held by TestFullDiskWithoutTheGuardSaysWhyEtcdStopped (cmd/kira) and
// TestQuietEtcdStillSaysWhyItStops.
func etcdLogger(c Config, stderr io.Writer) (*zap.Logger, error) {
	wrap := zap.WrapCore(func(core zapcore.Core) zapcore.Core { return stopNotice{core, c.Name, stderr} })
	if c.Quiet {
		enc := zapcore.NewJSONEncoder(logutil.DefaultZapLoggerConfig.EncoderConfig)
		return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(stderr)), zapcore.DPanicLevel), wrap), nil
	}
	cfg := logutil.DefaultZapLoggerConfig
	level := c.LogLevel
	if level == "" {
		level = "info"
	}
	var lvl zapcore.Level
	if err := lvl.Set(level); err != nil {
		return nil, err
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	return cfg.Build(wrap)
}

// stopNotice adds, after each entry at which etcd stops the process, a line
// saying so.
type stopNotice struct {
	zapcore.Core
	name string
	w    io.Writer
}

func (s stopNotice) With(fields []zapcore.Field) zapcore.Core {
	return stopNotice{s.Core.With(fields), s.name, s.w}
}

func (s stopNotice) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level >= zapcore.DPanicLevel || s.Enabled(e.Level) {
		return ce.AddCore(e, s)
	}
	return ce
}

func (s stopNotice) Write(e zapcore.Entry, fields []zapcore.Field) error {
	var err error
	if s.Enabled(e.Level) {
		err = s.Core.Write(e, fields)
	}
	if e.Level >= zapcore.DPanicLevel {
		fmt.Fprintln(s.w, stopReason(s.name, e.Message, fields))
	}
	return err
}

// stopReason is the line said when etcd stops the process.
func stopReason(name, msg string, fields []zapcore.Field) string {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	detail := msg
	if e, ok := enc.Fields["error"]; ok {
		detail += ": " + fmt.Sprint(e)
	}
	if strings.Contains(detail, "no space left on device") {
		return fmt.Sprintf("etcd member %s stops: the filesystem of its data directory is full (%s); free space on it, then start it again (its data is intact: it replays its WAL)", name, detail)
	}
	return fmt.Sprintf("etcd member %s stops: %s", name, detail)
}
