package managed

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones even where the host has no zoneinfo

	"github.com/robfig/cron/v3"
)

// cronParser reads the SDK's 5-field POSIX cron (minute hour day-of-month
// month day-of-week); descriptors (@daily) are not enabled.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// maxUpcomingRuns is how many upcoming fires a deployment shows.
const maxUpcomingRuns = 5

// schedule is a parsed deployment schedule: fires are computed in its
// zone, so "0 9 * * *" is 9am local time across DST changes.
type schedule struct {
	cron cron.Schedule
	loc  *time.Location
}

// parseSchedule checks expression and timezone; field names the schedule
// field in messages ("schedule").
func parseSchedule(field, expression, timezone string) (*schedule, error) {
	if strings.ContainsAny(expression, "LW#?@") || strings.Contains(strings.ToUpper(expression), "TZ=") {
		return nil, badRequest("field %q: %q uses extended cron syntax (L, W, #, ?, @descriptors or TZ=); use 5 plain fields: minute hour day-of-month month day-of-week", field+".expression", expression)
	}
	fields := strings.Fields(expression)
	if len(fields) != 5 {
		return nil, badRequest("field %q: %q has %d fields; a schedule has 5: minute hour day-of-month month day-of-week", field+".expression", expression, len(fields))
	}
	dow, err := sundaySeven(fields[4])
	if err != nil {
		return nil, badRequest("field %q: %v", field+".expression", err)
	}
	fields[4] = dow
	c, err := cronParser.Parse(strings.Join(fields, " "))
	if err != nil {
		return nil, badRequest("field %q: %q is not a valid cron expression: %v", field+".expression", expression, err)
	}
	if timezone == "" || timezone == "Local" {
		return nil, badRequest("field %q must be an IANA timezone such as \"UTC\" or \"America/Los_Angeles\"", field+".timezone")
	}
	loc, err := time.LoadLocation(timezone)
	if err != nil {
		return nil, badRequest("field %q: %q is not an IANA timezone", field+".timezone", timezone)
	}
	return &schedule{cron: c, loc: loc}, nil
}

// sundaySeven rewrites day-of-week 7 (POSIX: Sunday, like 0) into the 0-6
// the parser knows: "7" → "0", "a-7" → "a-6,0".
func sundaySeven(f string) (string, error) {
	parts := strings.Split(f, ",")
	var out []string
	for _, p := range parts {
		rng, _, hasStep := strings.Cut(p, "/")
		lo, hi, isRange := strings.Cut(rng, "-")
		switch {
		case rng == "7":
			out = append(out, "0")
			continue
		case isRange && hi == "7":
			if hasStep {
				return "", fmt.Errorf("day-of-week range %q with a step cannot end at 7; use 0 for Sunday", p)
			}
			if n, err := strconv.Atoi(lo); err == nil && n == 7 {
				out = append(out, "0")
				continue
			}
			out = append(out, lo+"-6", "0")
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, ","), nil
}

// next is the first fire strictly after t (UTC).
func (s *schedule) next(t time.Time) time.Time {
	return s.cron.Next(t.In(s.loc)).UTC()
}

// upcoming lists the next n fires after t.
func (s *schedule) upcoming(t time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for i := 0; i < n; i++ {
		t = s.next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}
