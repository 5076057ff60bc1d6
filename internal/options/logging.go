package options

import (
	"fmt"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// ParseLogLevel maps a --log-level value to a zap level.
func ParseLogLevel(level string) (zapcore.Level, error) {
	switch level {
	case "debug":
		return zapcore.DebugLevel, nil
	case "info":
		return zapcore.InfoLevel, nil
	case "warn":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	return 0, fmt.Errorf("--log-level=%q: must be debug, info, warn or error", level)
}

// NewLogger builds the process logger from validated options. Stack traces are
// kept for panics only: user errors should read as one line.
func (o *Options) NewLogger() logr.Logger {
	level, _ := ParseLogLevel(o.LogLevel)
	encoder := crzap.JSONEncoder()
	if o.LogFormat == "text" {
		encoder = crzap.ConsoleEncoder()
	}
	return crzap.New(encoder, crzap.Level(level), crzap.StacktraceLevel(zapcore.PanicLevel))
}
