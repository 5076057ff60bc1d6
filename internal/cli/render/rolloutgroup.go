package render

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// RolloutGroupView is a group with what its tree shows beside its status:
// each member's StatefulSet and pods, read at Now. The counts come from the
// pods read: the operator writes progress to status at most every few
// seconds, and a count beside a pod row must agree with the rows.
type RolloutGroupView struct {
	Group *v1alpha1.RolloutGroup
	// StatefulSets are the members' StatefulSets by name; a missing member
	// has none.
	StatefulSets map[string]*appsv1.StatefulSet
	// Pods are the pods each member's StatefulSet controls, by member name.
	Pods map[string][]*corev1.Pod
	// Shared is the ZoneDisruptionBudget the group shares
	// (spec.sharedDisruptionBudget), whose record holds its intents; nil
	// when it shares none, or the one it names does not exist.
	Shared *v1alpha1.ZoneDisruptionBudget
	Now    time.Time
}

// liveTotals sums the members' counts from their pods; false when a member
// has no StatefulSet to count against.
func liveTotals(v RolloutGroupView) (podCounts, bool) {
	var total podCounts
	names := memberNames(v)
	for _, name := range names {
		sts := v.StatefulSets[name]
		if sts == nil {
			return podCounts{}, false
		}
		c := countPods(sts, classifyPods(sts, v.Pods[name], v.Group.Spec.MinReadySeconds, v.Now))
		total.replicas += c.replicas
		total.updated += c.updated
		total.ready += c.ready
		total.available += c.available
	}
	return total, len(names) > 0
}

// wrap breaks text at spaces into lines of at most width characters, each
// after the first prefixed by indent; width <= 0 leaves it whole.
func wrap(text string, width int, indent string) string {
	if width <= 0 || len([]rune(text)) <= width {
		return text
	}
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len([]rune(line))+1+len([]rune(word)) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	lines = append(lines, line)
	return strings.Join(lines, "\n"+indent)
}

// RolloutGroup writes the group: a header saying what it does and waits for,
// its disruption hold and analysis, then the tree of its members in rollout
// order and the pods of each that are not simply updated and available.
func RolloutGroup(w io.Writer, v RolloutGroupView, s Style) error {
	rg := v.Group
	st := rg.Status
	var b strings.Builder
	phase := string(st.Phase)
	if phase == "" {
		phase = "Unknown"
	}
	field := header(&b, s, rg.Name, rg.Namespace, phase, conditionReason(st.Conditions, v1alpha1.ConditionReady))
	if rg.Spec.Paused {
		field("Paused", s.Phase("yes")+": spec.paused is set; no pod is deleted until resumed")
	}
	total, live := liveTotals(v)
	updated := st.Updated
	available := st.AvailableReplicas
	if live {
		updated, available = fmt.Sprintf("%d/%d", total.updated, total.replicas), total.available
	}
	if updated == "" {
		updated = "-"
	}
	progress := fmt.Sprintf("%s, %d available", updated, available)
	switch start, done := st.RolloutStartTime, st.RolloutCompletionTime; {
	case start != nil && done != nil && !done.Before(start):
		progress += fmt.Sprintf("; the last rollout rolled %d pods in %s, complete %s", st.PodsRolled,
			duration.HumanDuration(done.Sub(start.Time)), ago(v.Now, done.Time))
	case start != nil:
		progress += fmt.Sprintf(", %d pods rolled in the rollout started %s", st.PodsRolled, ago(v.Now, start.Time))
	}
	field("Updated", progress)
	if len(rg.Spec.Steps) > 0 {
		field("Step", stepLine(rg, v.Now))
	}
	if at := rg.Spec.RestartAt; at != nil {
		field("Restart", fmt.Sprintf("pods created before %s are replaced (spec.restartAt, %s)", stamp(at.Time), ago(v.Now, at.Time)))
	}
	field("Waiting for", wrap(waitingLine(rg, v.Now), s.Width-14, strings.Repeat(" ", 14)))
	field("Disruption", disruptionLine(v))
	if line := volumeLine(rg); line != "" {
		field("Volumes", wrap(line, s.Width-14, strings.Repeat(" ", 14)))
	}
	writeAnalysis(&b, field, rg, v.Now, s)
	b.WriteString("\n")

	rows := [][]cell{{plain("NAME"), plain("STATUS"), plain("REVISION"), plain("INFO")}}
	rows = append(rows, []cell{{text: rg.Name, paint: s.Bold}, {text: phase, paint: s.Phase}, plain(""), plain(updated + " updated")})
	members := memberNames(v)
	for i, name := range members {
		last := i == len(members)-1
		branch, indent := "├─ ", "│  "
		if last {
			branch, indent = "└─ ", "   "
		}
		rows = append(rows, memberRows(v, name, branch, indent, s)...)
	}
	for _, line := range table(rows) {
		b.WriteString(line)
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// waitingLine says what the group waits for and since when: since the last
// change the operator recorded, a condition's transition or progress.
func waitingLine(rg *v1alpha1.RolloutGroup, now time.Time) string {
	st := rg.Status
	msg := st.Message
	switch {
	case st.Phase == "":
		return "the operator to report a status (is it running and watching this namespace?)"
	case st.Phase == v1alpha1.PhaseComplete && !rg.Spec.Paused:
		msg = "nothing: " + msg
	}
	since := waitingSince(st)
	if since.IsZero() {
		return msg
	}
	return fmt.Sprintf("%s (since %s)", msg, ago(now, since))
}

// waitingSince is when the group began waiting for what its message says:
// for a step's wait (a promote, a pause, its pods' availability) the time
// status.step records, which the message names too; otherwise the last
// condition transition or progress. Condition times alone would make a step
// that has waited for minutes look seconds old after an operator restart
// rewrote its conditions.
func waitingSince(st v1alpha1.RolloutGroupStatus) time.Time {
	stepWaits := func(reason string) bool {
		return reason == v1alpha1.ReasonWaitingForPromote || reason == v1alpha1.ReasonStepPause || reason == v1alpha1.ReasonWaitingForStep
	}
	if st.Step != nil && st.Step.Since != nil && slices.ContainsFunc(st.Conditions, func(c metav1.Condition) bool { return stepWaits(c.Reason) }) {
		return st.Step.Since.Time
	}
	var since time.Time
	for _, c := range st.Conditions {
		if c.LastTransitionTime.After(since) {
			since = c.LastTransitionTime.Time
		}
	}
	if st.LastProgressTime != nil && st.LastProgressTime.After(since) {
		since = st.LastProgressTime.Time
	}
	return since
}

// disruptionLine describes the record the group's disruptions are in: its
// own, or that of the ZoneDisruptionBudget it shares.
func disruptionLine(v RolloutGroupView) string {
	name := v.Group.Spec.SharedDisruptionBudget
	switch {
	case name == "":
		return holdLine(v.Group.Status.Disruption, v.Now)
	case v.Shared == nil:
		return fmt.Sprintf("shared with ZoneDisruptionBudget %s, which does not exist: the group takes no pod until it does", name)
	}
	return fmt.Sprintf("shared with ZoneDisruptionBudget %s: %s", name, holdLine(v.Shared.Status.Disruption, v.Now))
}

// holdLine describes the group's recorded disruptions: for each, which
// zone's pods were let go, for what, who asked, when, and when it expires
// if its holder never acts; each ends once its pods are seen replaced.
func holdLine(h *v1alpha1.DisruptionHold, now time.Time) string {
	if h == nil || len(h.Intents) == 0 {
		return "none recorded"
	}
	lines := make([]string, 0, len(h.Intents))
	for _, in := range h.Intents {
		names := make([]string, 0, len(in.Pods))
		for _, p := range in.Pods {
			names = append(names, p.Name)
		}
		line := fmt.Sprintf("zone %s: %s decided %s", in.Zone, in.Reason, ago(now, in.DecidedAt.Time))
		if in.Holder != "" {
			line += " by " + in.Holder
		}
		switch {
		case in.MaxAtOnce > 0:
			// A reservation: the rest of a zone, released in this order.
			line += fmt.Sprintf(", reserved pods %s in this order, at most %d of the zone unavailable at once", reservedNames(names), in.MaxAtOnce)
		case len(names) > 0:
			line += ", pods " + strings.Join(names, ", ")
		}
		if now.Before(in.ExpiresAt.Time) {
			line += ", until seen replaced (expires " + ago(now, in.ExpiresAt.Time) + " if not acted on)"
		} else {
			line += ", until seen replaced"
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "; ")
}

// reservedNames names a reservation's pods: all of them up to six, else
// the first three, how many more, and the last.
func reservedNames(names []string) string {
	if len(names) <= 6 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, … %d more …, %s", strings.Join(names[:3], ", "), len(names)-4, names[len(names)-1])
}

// memberNames is the members in rollout order: as status lists them, else
// as the spec does, else (a selector the operator has not resolved yet) the
// StatefulSets read, by name.
func memberNames(v RolloutGroupView) []string {
	var names []string
	for _, m := range v.Group.Status.StatefulSets {
		names = append(names, m.Name)
	}
	if len(names) > 0 {
		return names
	}
	for _, m := range v.Group.Spec.StatefulSets {
		names = append(names, m.Name)
	}
	if len(names) > 0 {
		return names
	}
	for name := range v.StatefulSets {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// memberRows is a member's row and the rows of its pods worth a look: every
// pod not updated and available on its own row, and the outdated pods that
// wait for their turn folded into one.
func memberRows(v RolloutGroupView, name, branch, indent string, s Style) [][]cell {
	var status v1alpha1.MemberStatus
	if i := slices.IndexFunc(v.Group.Status.StatefulSets, func(m v1alpha1.MemberStatus) bool { return m.Name == name }); i >= 0 {
		status = v.Group.Status.StatefulSets[i]
	}
	sts := v.StatefulSets[name]
	phase := string(status.Phase)
	if phase == "" {
		phase = "-"
	}
	if sts == nil {
		return [][]cell{{plain(branch + name), {text: "Missing", paint: s.Phase}, plain(""), plain("StatefulSet not found")}}
	}
	pods := classifyPods(sts, v.Pods[name], v.Group.Spec.MinReadySeconds, v.Now)
	c := countPods(sts, pods)
	info := fmt.Sprintf("%d/%d updated, %d ready, %d available, maxUnavailable %d",
		c.updated, c.replicas, c.ready, c.available, status.MaxUnavailable)
	if status.Partition != nil {
		info += fmt.Sprintf(", partition %d", *status.Partition)
	}
	if status.Message != "" {
		info += "; " + status.Message
	}
	rows := [][]cell{{plain(branch + name), {text: phase, paint: s.Phase}, plain(shortRevision(name, sts.Status.UpdateRevision)), plain(info)}}
	var shown []podLine
	waiting := map[string][]int{} // outdated, available pods by revision
	updated := 0
	for _, p := range pods {
		switch p.state {
		case PodUpdated:
			updated++
		case PodOutdated:
			waiting[p.revision] = append(waiting[p.revision], p.ordinal)
		default:
			shown = append(shown, p)
		}
	}
	type podRow struct {
		name, state, revision, info string
	}
	var podRows []podRow
	for _, p := range shown {
		podRows = append(podRows, podRow{p.name, string(p.state), shortRevision(name, p.revision), p.detail})
	}
	revisions := make([]string, 0, len(waiting))
	for rev := range waiting {
		revisions = append(revisions, rev)
	}
	slices.Sort(revisions)
	for _, rev := range revisions {
		ords := waiting[rev]
		podRows = append(podRows, podRow{fmt.Sprintf("%s-[%s]", name, ordinalRanges(ords)), string(PodOutdated),
			shortRevision(name, rev), fmt.Sprintf("%d Ready, waiting to be rolled", len(ords))})
	}
	if updated > 0 && len(podRows) > 0 {
		podRows = append(podRows, podRow{fmt.Sprintf("%d more", updated), string(PodUpdated), "", "updated and available"})
	}
	for i, p := range podRows {
		b := "├─ "
		if i == len(podRows)-1 {
			b = "└─ "
		}
		rows = append(rows, []cell{plain(indent + b + p.name), {text: p.state, paint: s.Phase}, plain(p.revision), plain(p.info)})
	}
	return rows
}

// shortRevision is a revision without its StatefulSet's name: the hash that
// tells revisions apart.
func shortRevision(sts, revision string) string {
	if revision == "" {
		return "-"
	}
	return strings.TrimPrefix(revision, sts+"-")
}

// stepLine says where the rollout stands in spec.steps: the step, its share
// of the pods, and what it waits for since when (a promote, the end of its
// pause).
func stepLine(rg *v1alpha1.RolloutGroup, now time.Time) string {
	steps := rg.Spec.Steps
	st := rg.Status.Step
	if st == nil {
		shares := make([]string, 0, len(steps))
		for _, step := range steps {
			shares = append(shares, fmt.Sprintf("%d%%", step.Percent))
		}
		return fmt.Sprintf("%d steps (%s); none under way", len(steps), strings.Join(shares, ", "))
	}
	if st.WaitingFor == v1alpha1.StepWaitDone {
		return fmt.Sprintf("all %d steps done", len(steps))
	}
	line := fmt.Sprintf("%d of %d: %d%% (%d pods), waiting for %s", st.Index+1, len(steps), st.Percent, st.TargetReplicas, stepWait(st.WaitingFor))
	if st.Since != nil {
		line += " since " + ago(now, st.Since.Time)
	}
	if st.Until != nil {
		line += fmt.Sprintf(", until %s (%s)", stamp(st.Until.Time), ago(now, st.Until.Time))
	}
	if st.WaitingFor == v1alpha1.StepWaitPromote {
		line += fmt.Sprintf(": kubectl echelon promote %s", rg.Name)
	}
	return line
}

// stepWait names what a step waits for, as a person would.
func stepWait(w v1alpha1.StepWait) string {
	switch w {
	case v1alpha1.StepWaitPods:
		return "its pods to be rolled"
	case v1alpha1.StepWaitAvailability:
		return "its pods to be available"
	case v1alpha1.StepWaitDuration:
		return "its pause to end"
	case v1alpha1.StepWaitPromote:
		return "a promote"
	}
	return string(w)
}
