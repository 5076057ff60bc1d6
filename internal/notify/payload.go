package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// Schemas of the JSON bodies; a change that is not backward compatible
// gets a new version.
const (
	NotificationSchema = "echelon.dev/notification/v1"
	CallbackSchema     = "echelon.dev/callback/v1"
)

// HTTP headers every notification and callback carries.
const (
	HeaderDeliveryID = "Echelon-Delivery-Id"
	HeaderMessageKey = "Echelon-Message-Key"
	HeaderEvent      = "Echelon-Event"
)

// Group identifies the RolloutGroup a body is about.
type Group struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// Object identifies the object a notification is about: a RolloutGroup,
// a ScalingPolicy or a DelayedDownscale.
type Object struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// Kinds that send notifications.
const (
	KindRolloutGroup     = "RolloutGroup"
	KindScalingPolicy    = "ScalingPolicy"
	KindDelayedDownscale = "DelayedDownscale"
)

// Notification is the JSON body of schema echelon.dev/notification/v1.
// The schema grows only by optional fields (object, target, state,
// fromReplicas, toReplicas, leader came with the ScalingPolicy and
// DelayedDownscale events): receivers ignore fields they do not know.
type Notification struct {
	Schema     string `json:"schema"`
	DeliveryID string `json:"deliveryId"`
	MessageKey string `json:"messageKey"`
	Sequence   int64  `json:"sequence"`
	Event      string `json:"event"`
	Time       string `json:"time"`
	Object     Object `json:"object"`
	// Group is set for a RolloutGroup only.
	Group *Group `json:"group,omitempty"`
	// Rollout is set for a RolloutGroup only.
	Rollout   string `json:"rollout,omitempty"`
	RolloutID string `json:"rolloutId,omitempty"`
	Phase     string `json:"phase,omitempty"`
	Member    string `json:"member,omitempty"`
	Updated   string `json:"updated,omitempty"`
	// Target is the StatefulSet a ScalingPolicy or DelayedDownscale scales.
	Target string `json:"target,omitempty"`
	// State is the phase of a ScalingPolicy or DelayedDownscale.
	State        string `json:"state,omitempty"`
	FromReplicas *int32 `json:"fromReplicas,omitempty"`
	ToReplicas   *int32 `json:"toReplicas,omitempty"`
	Leader       string `json:"leader,omitempty"`
	Message      string `json:"message,omitempty"`
	Page         int32  `json:"page"`
	Pages        int32  `json:"pages"`
	// Pods is omitted, not empty, for an event that lists none.
	Pods []string `json:"pods,omitempty"`
}

// Callback is the JSON body of schema echelon.dev/callback/v1.
type Callback struct {
	Schema     string `json:"schema"`
	DeliveryID string `json:"deliveryId"`
	Outcome    string `json:"outcome"`
	Time       string `json:"time"`
	Group      Group  `json:"group"`
	Rollout    string `json:"rollout"`
	RolloutID  string `json:"rolloutId,omitempty"`
}

// Group is the group o is, for the callback's body.
func (o Object) Group() Group {
	return Group{Namespace: o.Namespace, Name: o.Name, UID: o.UID}
}

// Body is the body of m about o for a receiver of format.
func Body(format v1alpha1.NotificationFormat, o Object, m Message) ([]byte, error) {
	if format == v1alpha1.NotificationFormatSlack {
		return json.Marshal(slackBody(o, m))
	}
	ev := m.Event
	n := Notification{
		Schema: NotificationSchema, DeliveryID: m.DeliveryID, MessageKey: m.MessageKey,
		Sequence: ev.Sequence, Event: string(ev.Type), Time: ev.Time.UTC().Format(time.RFC3339),
		Object: o, Rollout: ev.Rollout, RolloutID: ev.RolloutID, Phase: string(ev.Phase),
		Updated: ev.Updated, Message: ev.Message, State: ev.State,
		FromReplicas: ev.FromReplicas, ToReplicas: ev.ToReplicas, Leader: ev.Leader,
		Page: m.Page, Pages: m.Pages, Pods: m.Pods,
	}
	if o.Kind == KindRolloutGroup {
		g := o.Group()
		n.Group, n.Member = &g, ev.Member
	} else {
		n.Target = ev.Member
	}
	return json.Marshal(n)
}

// CallbackBody is the body of the callback c.
func CallbackBody(g Group, c v1alpha1.CallbackStatus) ([]byte, error) {
	return json.Marshal(Callback{
		Schema: CallbackSchema, DeliveryID: c.DeliveryID, Outcome: string(c.Outcome),
		Time: c.Time.UTC().Format(time.RFC3339), Group: g, Rollout: c.Rollout, RolloutID: c.RolloutID,
	})
}

// Slack's incoming-webhook payload: text is the notification's fallback,
// blocks what the channel shows.
type slackPayload struct {
	Text   string       `json:"text"`
	Blocks []slackBlock `json:"blocks"`
}

type slackBlock struct {
	Type     string      `json:"type"`
	Text     *slackText  `json:"text,omitempty"`
	Elements []slackText `json:"elements,omitempty"`
}

type slackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// slackPodsMax keeps a page's pod list within the 3,000 characters Slack
// takes in a section's text (50 names of up to 253 characters could exceed it).
const slackPodsMax = 2900

// slackEmoji marks each event in the channel.
var slackEmoji = map[v1alpha1.NotificationEventType]string{
	v1alpha1.NotificationStarted:       ":rocket:",
	v1alpha1.NotificationMemberReached: ":arrow_forward:",
	v1alpha1.NotificationStepReached:   ":pause_button:",
	v1alpha1.NotificationPaused:        ":double_vertical_bar:",
	v1alpha1.NotificationGateFailed:    ":x:",
	v1alpha1.NotificationRollingBack:   ":rewind:",
	v1alpha1.NotificationFailed:        ":red_circle:",
	v1alpha1.NotificationComplete:      ":white_check_mark:",
	v1alpha1.NotificationStalled:       ":warning:",

	v1alpha1.NotificationVolumeResizeStarted:  ":floppy_disk:",
	v1alpha1.NotificationVolumeResizeZoneDone: ":arrow_forward:",
	v1alpha1.NotificationVolumeResizeComplete: ":white_check_mark:",
	v1alpha1.NotificationVolumeResizeBlocked:  ":x:",

	v1alpha1.NotificationScaled:      ":left_right_arrow:",
	v1alpha1.NotificationScaleHeld:   ":hourglass_flowing_sand:",
	v1alpha1.NotificationScaleFailed: ":x:",

	v1alpha1.NotificationDownscaleRequested: ":arrow_down:",
	v1alpha1.NotificationDownscaleDelayed:   ":hourglass_flowing_sand:",
	v1alpha1.NotificationDownscaleDone:      ":white_check_mark:",
	v1alpha1.NotificationDownscaleCancelled: ":leftwards_arrow_with_hook:",
	v1alpha1.NotificationDownscaleFailed:    ":x:",
}

func slackBody(o Object, m Message) slackPayload {
	ev := m.Event
	if o.Kind != KindRolloutGroup {
		return slackScaleBody(o, m)
	}
	id := ev.RolloutID
	if id == "" {
		id = ev.Rollout
	}
	headline := fmt.Sprintf("%s *%s/%s* %s", slackEmoji[ev.Type], o.Namespace, o.Name, ev.Type)
	if ev.Member != "" {
		headline += ": " + ev.Member
	}
	if ev.Updated != "" {
		headline += fmt.Sprintf(" (%s updated)", ev.Updated)
	}
	blocks := slackBlocks(headline, "Pods", fmt.Sprintf("rollout `%s`", id), m)
	return slackPayload{Text: fmt.Sprintf("%s/%s %s (rollout %s)", o.Namespace, o.Name, ev.Type, id), Blocks: blocks}
}

// slackBlocks are the blocks of m: the headline and the event's message,
// the page's pods under podsTitle, and a context line that starts with
// context.
func slackBlocks(headline, podsTitle, context string, m Message) []slackBlock {
	ev := m.Event
	text := headline
	if ev.Message != "" {
		text += "\n" + ev.Message
	}
	blocks := []slackBlock{{Type: "section", Text: &slackText{Type: "mrkdwn", Text: text}}}
	if len(m.Pods) > 0 {
		blocks = append(blocks, slackBlock{Type: "section", Text: &slackText{
			Type: "mrkdwn", Text: fmt.Sprintf("%s (%d of %d):\n```%s```", podsTitle, m.Page, m.Pages, truncate(strings.Join(m.Pods, "\n"), slackPodsMax)),
		}})
	}
	return append(blocks, slackBlock{Type: "context", Elements: []slackText{{
		Type: "mrkdwn", Text: fmt.Sprintf("%s · event %d · delivery `%s`", context, ev.Sequence, m.DeliveryID),
	}}})
}

// slackScaleBody is the Slack message of an event of a ScalingPolicy or a
// DelayedDownscale: the target, its replicas before and after, the leader
// followed, the pods a downscale removes.
func slackScaleBody(o Object, m Message) slackPayload {
	ev := m.Event
	change := ev.Member
	if ev.FromReplicas != nil && ev.ToReplicas != nil {
		change += fmt.Sprintf(" %d → %d replicas", *ev.FromReplicas, *ev.ToReplicas)
	}
	if ev.Leader != "" {
		change += fmt.Sprintf(" (following %s)", ev.Leader)
	}
	headline := fmt.Sprintf("%s *%s %s/%s* %s: %s", slackEmoji[ev.Type], o.Kind, o.Namespace, o.Name, ev.Type, change)
	blocks := slackBlocks(headline, "Pods removed", ev.State, m)
	return slackPayload{Text: fmt.Sprintf("%s %s/%s %s: %s", o.Kind, o.Namespace, o.Name, ev.Type, change), Blocks: blocks}
}
