package notify

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden with the output of the code under test")

// golden compares got (indented) with testdata/<name>.golden, or writes it
// with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, got, "", "  "); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", name, err, got)
	}
	out.WriteByte('\n')
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("%s differs from %s:\n%s", name, path, out.Bytes())
	}
}

var (
	testGroup = Group{Namespace: "mimir", Name: "ingester", UID: "6f1c2a4e-0000-4000-8000-000000000001"}
	testTime  = time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC)
)

func memberEvent(replicas int32) v1alpha1.NotificationEvent {
	return v1alpha1.NotificationEvent{
		Sequence: 2, Type: v1alpha1.NotificationMemberReached, Rollout: "deploy-42@1795676400", RolloutID: "deploy-42",
		Time: metav1.NewTime(testTime), Phase: v1alpha1.PhaseProgressing, Member: "ingester-zone-b", Replicas: replicas,
		Updated: "120/360", Message: "ingester-zone-b: 0/120 updated, 1 pod terminating",
	}
}

func messageOf(ev v1alpha1.NotificationEvent, page int32) Message {
	_, m, ok := Next(v1alpha1.ReceiverStatus{Delivered: ev.Sequence - 1, PagesDelivered: page - 1}, v1alpha1.NotificationReceiver{}, testGroup.UID, []v1alpha1.NotificationEvent{ev})
	if !ok {
		panic("no message")
	}
	return m
}

// The bodies each format sends, as receivers see them.
func TestBodies(t *testing.T) {
	complete := v1alpha1.NotificationEvent{
		Sequence: 7, Type: v1alpha1.NotificationComplete, Rollout: "-@1795676400", Time: metav1.NewTime(testTime),
		Phase: v1alpha1.PhaseComplete, Updated: "360/360", Message: "every pod on its update revision",
	}
	tests := []struct {
		name   string
		format v1alpha1.NotificationFormat
		msg    Message
	}{
		{"json-member-page-3-of-3", v1alpha1.NotificationFormatJSON, messageOf(memberEvent(120), 3)},
		{"json-complete-no-rollout-id", v1alpha1.NotificationFormatJSON, messageOf(complete, 1)},
		{"slack-member-page-1-of-3", v1alpha1.NotificationFormatSlack, messageOf(memberEvent(120), 1)},
		{"slack-complete", v1alpha1.NotificationFormatSlack, messageOf(complete, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := Body(tt.format, testGroup, tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name, body)
		})
	}
}

func TestCallbackBody(t *testing.T) {
	c := v1alpha1.CallbackStatus{
		Rollout: "deploy-42@1795676400", RolloutID: "deploy-42", Outcome: v1alpha1.OutcomeRolledBack,
		Time: metav1.NewTime(testTime), DeliveryID: CallbackID(testGroup.UID, "deploy-42@1795676400", v1alpha1.OutcomeRolledBack),
	}
	body, err := CallbackBody(testGroup, c)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "callback-rolled-back", body)
}
