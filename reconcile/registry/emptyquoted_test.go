package registry

import (
	"testing"
)

// TestEmptyQuotedValueRefusedLikeStrictPath is the regression test of a bug
// the reliability suite's fuzzing found (FuzzParse, corpus entry
// reliability_empty_quoted_endpoint): the fast path read an endpoint given
// as an empty quoted string as no endpoint and accepted the registry, while
// the strict decoder refuses an empty endpoint, so whether a registry was
// valid depended on its layout.
func TestEmptyQuotedValueRefusedLikeStrictPath(t *testing.T) {
	for _, doc := range []string{
		"services:\n- name: api\n  host: web-1\n  unit: api.service\n  endpoint: ''\n  repair: restart\n  channel: ssh\n",
		"services:\n  - name: api\n    host: web-1\n    unit: api.service\n    endpoint: \"\"\n    repair: restart\n    channel: exec\n",
		"services:\n  - name: ''\n    host: web-1\n    unit: api.service\n    repair: restart\n    channel: exec\n",
	} {
		_, err := Parse([]byte(doc))
		_, serr := strictDecode([]byte(doc))
		if err == nil || serr == nil || err.Error() != serr.Error() {
			t.Errorf("Parse = %v, strict = %v; want the strict refusal from both\n%s", err, serr, doc)
		}
	}
}
