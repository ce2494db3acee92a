package attr

import (
	"encoding/json"

	st "github.com/sluicemq/sluice/sluicetype"
)

// A queue's Policy attribute, as AddPermission and RemovePermission edit
// it.

type policyDoc struct {
	Version   string            `json:"Version"`
	ID        string            `json:"Id"`
	Statement []policyStatement `json:"Statement"`
}

type policyStatement struct {
	Sid       string `json:"Sid"`
	Effect    string `json:"Effect"`
	Principal struct {
		AWS any `json:"AWS"`
	} `json:"Principal"`
	Action   any    `json:"Action"`
	Resource string `json:"Resource"`
}

func oneOrMany(v []string) any {
	if len(v) == 1 {
		return v[0]
	}
	return v
}

// AddPermission returns policy (a queue's Policy attribute, "" for none)
// with a statement allowing accounts the actions on the queue arn.
func AddPermission(policy, arn, label string, accounts, actions []string) (string, error) {
	doc := policyDoc{Version: "2008-10-17", ID: arn + "/SQSDefaultPolicy"}
	if policy != "" {
		_ = json.Unmarshal([]byte(policy), &doc)
	}
	for _, s := range doc.Statement {
		if s.Sid == label {
			return "", st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter Label is invalid. Reason: Already exists.", label)
		}
	}
	if len(doc.Statement) >= 20 {
		return "", st.Errorf(st.CodeOverLimit, "Too many permissions on this queue (the maximum is 20 statements).")
	}
	s := policyStatement{Sid: label, Effect: "Allow", Resource: arn}
	principals := make([]string, len(accounts))
	for i, a := range accounts {
		principals[i] = "arn:aws:iam::" + a + ":root"
	}
	acts := make([]string, len(actions))
	for i, a := range actions {
		acts[i] = "SQS:" + a
	}
	s.Principal.AWS = oneOrMany(principals)
	s.Action = oneOrMany(acts)
	doc.Statement = append(doc.Statement, s)
	raw, _ := json.Marshal(doc)
	return string(raw), nil
}

// RemovePermission returns policy without the statement labelled label
// ("" when none is left).
func RemovePermission(policy, label string) (string, error) {
	var doc policyDoc
	if policy != "" {
		_ = json.Unmarshal([]byte(policy), &doc)
	}
	kept := doc.Statement[:0]
	found := false
	for _, s := range doc.Statement {
		if s.Sid == label {
			found = true
			continue
		}
		kept = append(kept, s)
	}
	if !found {
		return "", st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter Label is invalid. Reason: can't find label.", label)
	}
	if len(kept) == 0 {
		return "", nil
	}
	doc.Statement = kept
	raw, _ := json.Marshal(doc)
	return string(raw), nil
}

// ValidateTags checks a queue's tags.
func ValidateTags(tags map[string]string) error {
	if len(tags) > 50 {
		return st.Errorf(st.CodeInvalidParameterValue, "Too many tags added for queue. The maximum is 50 tags.")
	}
	for k, v := range tags {
		if k == "" || len(k) > 128 {
			return st.Errorf(st.CodeInvalidParameterValue, "Tag keys must be between 1 and 128 characters in length.")
		}
		if len(v) > 256 {
			return st.Errorf(st.CodeInvalidParameterValue, "Tag values may only be up to 256 characters in length.")
		}
	}
	return nil
}
