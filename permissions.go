package sluice

import (
	"context"
	"encoding/json"

	st "github.com/sluicemq/sluice/sluicetype"
)

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

func (b *broker) addPermission(ctx context.Context, name, label string, accounts, actions []string) error {
	qs, err := b.lookup(name)
	if err != nil {
		return err
	}
	if !validName(label, 80, false) {
		return st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter Label is invalid. Reason: Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length.", label)
	}
	if len(accounts) == 0 {
		return st.Errorf(st.CodeMissingParameter, "The request must contain the parameter AWSAccountIds.")
	}
	if len(actions) == 0 {
		return st.Errorf(st.CodeMissingParameter, "The request must contain the parameter Actions.")
	}
	arn := b.arn(name)
	return b.updateMeta(qs, func(m *queueMeta) error {
		doc := policyDoc{Version: "2008-10-17", ID: arn + "/SQSDefaultPolicy"}
		if p := m.Attrs["Policy"]; p != "" {
			_ = json.Unmarshal([]byte(p), &doc)
		}
		for _, s := range doc.Statement {
			if s.Sid == label {
				return st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter Label is invalid. Reason: Already exists.", label)
			}
		}
		if len(doc.Statement) >= 20 {
			return st.Errorf(st.CodeOverLimit, "Too many permissions on this queue (the maximum is 20 statements).")
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
		m.Attrs["Policy"] = string(raw)
		return nil
	})
}

func (b *broker) removePermission(ctx context.Context, name, label string) error {
	qs, err := b.lookup(name)
	if err != nil {
		return err
	}
	return b.updateMeta(qs, func(m *queueMeta) error {
		var doc policyDoc
		if p := m.Attrs["Policy"]; p != "" {
			_ = json.Unmarshal([]byte(p), &doc)
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
			return st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter Label is invalid. Reason: can't find label.", label)
		}
		if len(kept) == 0 {
			delete(m.Attrs, "Policy")
			return nil
		}
		doc.Statement = kept
		raw, _ := json.Marshal(doc)
		m.Attrs["Policy"] = string(raw)
		return nil
	})
}
