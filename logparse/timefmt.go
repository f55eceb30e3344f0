package logparse

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Time formats accepted by the json and regex parsers' time_format.
const (
	TimeAuto    = "auto"    // numbers by magnitude (s, ms, µs, ns), text as RFC 3339 or the combined layout
	TimeUnix    = "unix"    // seconds, fractions allowed
	TimeUnixMs  = "unix_ms" // milliseconds
	TimeUnixUs  = "unix_us" // microseconds
	TimeUnixNs  = "unix_ns" // nanoseconds
	TimeRFC3339 = "rfc3339" // 2006-01-02T15:04:05.999Z07:00
	// Anything else is a Go time layout, e.g. "2006-01-02 15:04:05".
)

// combinedLayout is the time layout of nginx/Apache logs.
const combinedLayout = "02/Jan/2006:15:04:05 -0700"

// checkTimeFormat rejects layouts that can never parse a time, so a typo
// fails at start instead of dead-lettering every line.
func checkTimeFormat(f string) error {
	switch f {
	case "", TimeAuto, TimeUnix, TimeUnixMs, TimeUnixUs, TimeUnixNs, TimeRFC3339:
		return nil
	}
	ref := time.Date(2021, 7, 9, 10, 20, 30, 0, time.UTC)
	if _, err := time.Parse(f, ref.Format(f)); err != nil || ref.Format(f) == f {
		return fmt.Errorf("time_format %q is neither auto, unix, unix_ms, unix_us, unix_ns, rfc3339 nor a Go time layout", f)
	}
	return nil
}

// parseTime returns s, read as format, in Unix milliseconds.
func parseTime(s, format string) (int64, error) {
	switch format {
	case "", TimeAuto:
		if f, err := parseNumber(s); err == nil {
			return scaleAuto(f)
		}
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t.UnixMilli(), nil
		}
		if ms, ok := parseCombinedTime(s); ok {
			return ms, nil
		}
		return 0, fmt.Errorf("time %q is neither a Unix time, RFC 3339 nor %s", s, combinedLayout)
	case TimeUnix, TimeUnixMs, TimeUnixUs, TimeUnixNs:
		f, err := parseNumber(s)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("time %q is not a number", s)
		}
		switch format {
		case TimeUnix:
			f *= 1e3
		case TimeUnixUs:
			f /= 1e3
		case TimeUnixNs:
			f /= 1e6
		}
		return clampMs(f)
	case TimeRFC3339:
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, fmt.Errorf("time %q is not RFC 3339", s)
		}
		return t.UnixMilli(), nil
	default:
		t, err := time.Parse(format, s)
		if err != nil {
			return 0, fmt.Errorf("time %q does not match layout %q", s, format)
		}
		return t.UnixMilli(), nil
	}
}

// parseNumber is strconv.ParseFloat with a faster path for the integers
// most logs write (Unix ms); the result is the same.
func parseNumber(s string) (float64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return float64(n), nil
	}
	return strconv.ParseFloat(s, 64)
}

// scaleAuto guesses the unit of a numeric time by its magnitude: any
// date between 1973 and 5138 in seconds is below 1e11, in milliseconds
// below 1e14, in microseconds below 1e17.
func scaleAuto(f float64) (int64, error) {
	a := math.Abs(f)
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, fmt.Errorf("time %v is not a number", f)
	case a < 1e11:
		f *= 1e3
	case a < 1e14:
	case a < 1e17:
		f /= 1e3
	default:
		f /= 1e6
	}
	return clampMs(f)
}

func clampMs(f float64) (int64, error) {
	if f > math.MaxInt64/2 || f < math.MinInt64/2 || math.IsNaN(f) {
		return 0, fmt.Errorf("time %v is out of range", f)
	}
	return int64(math.Round(f)), nil
}

var months = [12]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

// parseCombinedTime parses "10/Oct/2000:13:55:36 -0700" without the
// generality (and cost) of time.Parse: this runs once per nginx line.
func parseCombinedTime(s string) (int64, bool) {
	if len(s) != 26 || s[2] != '/' || s[6] != '/' || s[11] != ':' || s[14] != ':' || s[17] != ':' || s[20] != ' ' {
		return 0, false
	}
	day, ok1 := digits(s[0:2])
	year, ok2 := digits(s[7:11])
	hh, ok3 := digits(s[12:14])
	mm, ok4 := digits(s[15:17])
	ss, ok5 := digits(s[18:20])
	zh, ok6 := digits(s[22:24])
	zm, ok7 := digits(s[24:26])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) || day < 1 || day > 31 || hh > 23 || mm > 59 || ss > 60 || zm > 59 {
		return 0, false
	}
	month := 0
	for i, m := range months {
		if s[3:6] == m {
			month = i + 1
			break
		}
	}
	if month == 0 {
		return 0, false
	}
	zone := int64(zh*3600 + zm*60)
	switch s[21] {
	case '+':
	case '-':
		zone = -zone
	default:
		return 0, false
	}
	secs := daysFromCivil(year, month, day)*86400 + int64(hh*3600+mm*60+ss) - zone
	return secs * 1000, true
}

func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// daysFromCivil is Howard Hinnant's days_from_civil: days since 1970-01-01
// of the proleptic Gregorian date y-m-d.
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}
