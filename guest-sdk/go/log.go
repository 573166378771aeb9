package orkestra

import "fmt"

// Level of a log line.
type Level uint32

const (
	LevelDebug Level = iota
	LevelInfo
	LevelWarn
	LevelError
)

// Debugf writes a debug line through the host, tagged with the component, the custom
// resource and the call; lines past the component's logBytes are dropped.
func Debugf(format string, args ...any) { writeLog(LevelDebug, fmt.Sprintf(format, args...)) }

// Infof writes an info line through the host.
func Infof(format string, args ...any) { writeLog(LevelInfo, fmt.Sprintf(format, args...)) }

// Warnf writes a warning line through the host.
func Warnf(format string, args ...any) { writeLog(LevelWarn, fmt.Sprintf(format, args...)) }

// Errorf writes an error line through the host; the last one explains a trap.
func Errorf(format string, args ...any) { writeLog(LevelError, fmt.Sprintf(format, args...)) }
