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
	testRG    = Object{Kind: KindRolloutGroup, Namespace: testGroup.Namespace, Name: testGroup.Name, UID: testGroup.UID}
	testSP    = Object{Kind: KindScalingPolicy, Namespace: "mimir", Name: "ingester-zone-b", UID: "6f1c2a4e-0000-4000-8000-000000000002"}
	testDD    = Object{Kind: KindDelayedDownscale, Namespace: "mimir", Name: "ingester-zone-a", UID: "6f1c2a4e-0000-4000-8000-000000000003"}
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
	scaled := v1alpha1.NotificationEvent{
		Sequence: 3, Type: v1alpha1.NotificationScaled, Time: metav1.NewTime(testTime), State: "ScalingUp",
		Member: "ingester-zone-b", FromReplicas: ptr(10), ToReplicas: ptr(12), Leader: "ingester-zone-a",
		Message: "scaled up from 10 to 12 replicas to follow leader ingester-zone-a",
	}
	requested := v1alpha1.NotificationEvent{
		Sequence: 1, Type: v1alpha1.NotificationDownscaleRequested, Time: metav1.NewTime(testTime), State: "Preparing",
		Member: "ingester-zone-a", Replicas: 120, FirstOrdinal: 10, FromReplicas: ptr(120), ToReplicas: ptr(10),
		Message: "preparing 110 pods for the downscale from 120 to 10",
	}
	done := v1alpha1.NotificationEvent{
		Sequence: 5, Type: v1alpha1.NotificationDownscaleDone, Time: metav1.NewTime(testTime), State: "Idle",
		Member: "ingester-zone-a", FromReplicas: ptr(120), ToReplicas: ptr(10), Message: "no downscale pending (10 replicas)",
	}
	tests := []struct {
		name   string
		format v1alpha1.NotificationFormat
		obj    Object
		msg    Message
	}{
		{"json-member-page-3-of-3", v1alpha1.NotificationFormatJSON, testRG, messageOf(memberEvent(120), 3)},
		{"json-complete-no-rollout-id", v1alpha1.NotificationFormatJSON, testRG, messageOf(complete, 1)},
		{"slack-member-page-1-of-3", v1alpha1.NotificationFormatSlack, testRG, messageOf(memberEvent(120), 1)},
		{"slack-complete", v1alpha1.NotificationFormatSlack, testRG, messageOf(complete, 1)},
		{"json-scalingpolicy-scaled", v1alpha1.NotificationFormatJSON, testSP, messageOf(scaled, 1)},
		{"slack-scalingpolicy-scaled", v1alpha1.NotificationFormatSlack, testSP, messageOf(scaled, 1)},
		{"json-delayeddownscale-requested-page-3-of-3", v1alpha1.NotificationFormatJSON, testDD, messageOf(requested, 3)},
		{"slack-delayeddownscale-requested-page-1-of-3", v1alpha1.NotificationFormatSlack, testDD, messageOf(requested, 1)},
		{"json-delayeddownscale-done", v1alpha1.NotificationFormatJSON, testDD, messageOf(done, 1)},
		{"slack-delayeddownscale-done", v1alpha1.NotificationFormatSlack, testDD, messageOf(done, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := Body(tt.format, tt.obj, tt.msg)
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
