package skills

import (
	"bytes"
	"regexp"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Front matter bounds, as the Agent Skills format sets them: the name is
// also the skill's directory in the sandbox, so it is one safe path
// segment.
const (
	maxNameLen        = 64
	maxDescriptionLen = 1024
)

var nameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// frontMatter reads the YAML front matter of SKILL.md: name and
// description, both required.
func frontMatter(md []byte) (name, description string, err error) {
	if !utf8.Valid(md) {
		return "", "", badInput("SKILL.md is not UTF-8 text")
	}
	text := string(bytes.TrimPrefix(md, []byte("\xef\xbb\xbf")))
	text = strings.ReplaceAll(text, "\r\n", "\n")
	if !strings.HasPrefix(text, "---\n") {
		return "", "", badInput("SKILL.md must start with a YAML front matter block (\"---\" lines) holding name and description")
	}
	body, _, ok := strings.Cut(text[4:], "\n---")
	if !ok {
		return "", "", badInput("SKILL.md's front matter has no closing \"---\" line")
	}
	var fm struct {
		Name        any `yaml:"name"`
		Description any `yaml:"description"`
	}
	if err := yaml.Unmarshal([]byte(body), &fm); err != nil {
		return "", "", badInput("SKILL.md's front matter is not valid YAML: %v", err)
	}
	name, ok = fm.Name.(string)
	if !ok || name == "" {
		return "", "", badInput("SKILL.md front matter field \"name\" is required: lowercase letters, digits and hyphens, at most %d characters", maxNameLen)
	}
	if len(name) > maxNameLen || !nameRE.MatchString(name) {
		return "", "", badInput("SKILL.md front matter field \"name\" %q must be lowercase letters, digits and single hyphens (not at either end), at most %d characters", name, maxNameLen)
	}
	description, ok = fm.Description.(string)
	description = strings.TrimSpace(description)
	if !ok || description == "" {
		return "", "", badInput("SKILL.md front matter field \"description\" is required: say what the skill does and when to use it")
	}
	if utf8.RuneCountInString(description) > maxDescriptionLen {
		return "", "", badInput("SKILL.md front matter field \"description\" is %d characters, over the limit of %d", utf8.RuneCountInString(description), maxDescriptionLen)
	}
	return name, description, nil
}
