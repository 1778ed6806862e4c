package yamlstrict

import (
	"errors"
	"fmt"
	"testing"
)

func TestOneLine(t *testing.T) {
	problems := func(n int) Errors {
		es := make(Errors, n)
		for i := range es {
			es[i] = Error{Line: i + 1, Column: 3, Msg: fmt.Sprintf("problem %d", i+1)}
		}
		return es
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"not yamlstrict", errors.New("read failed"), "read failed"},
		{"one", problems(1), "1:3: problem 1"},
		{"as many as shown", problems(3), "1:3: problem 1 | 2:3: problem 2 | 3:3: problem 3"},
		{"more than shown", problems(5), "1:3: problem 1 | 2:3: problem 2 | 3:3: problem 3 | and 2 more"},
		{"wrapped", fmt.Errorf("policy: %w", problems(4)), "1:3: problem 1 | 2:3: problem 2 | 3:3: problem 3 | and 1 more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OneLine(tt.err, 3); got != tt.want {
				t.Errorf("OneLine = %q\nwant      %q", got, tt.want)
			}
		})
	}
}
