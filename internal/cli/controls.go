package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/kube"
)

// control is one command that steers a RolloutGroup by writing what the
// operator documents for it: a spec field or an annotation.
type control struct {
	name  string
	short string
	long  string
	// refuse says why the control is meaningless for the group as it is,
	// "" when it is not.
	refuse func(rg *v1alpha1.RolloutGroup) string
	// change is the merge patch's content (without metadata.resourceVersion)
	// and what it does, in the words printed after it is written.
	change func(rg *v1alpha1.RolloutGroup, now time.Time) (map[string]any, string)
}

// maxConflicts is how often a control reads the group again when it changed
// between the read and the write: status moves every few seconds while a
// rollout runs.
const maxConflicts = 5

func newControlCommand(o *options, c control) *cobra.Command {
	return &cobra.Command{
		Use:               c.name + " NAME",
		Short:             c.short,
		Long:              c.long,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeGroup,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.session()
			if err != nil {
				return err
			}
			key := types.NamespacedName{Namespace: s.namespace, Name: args[0]}
			line, err := applyControl(cmd, s, key, c, o.now)
			if err != nil {
				return err
			}
			fmt.Fprintln(o.streams.Out, line)
			return nil
		},
	}
}

// applyControl reads the group, refuses when the control is meaningless,
// and writes the change conditional on the group as read (its
// resourceVersion), so that the decision to write holds for what is
// written. Fields unknown to the cluster's CRD are refused, not dropped:
// an operator too old for a control says so.
func applyControl(cmd *cobra.Command, s *session, key types.NamespacedName, c control, now func() time.Time) (string, error) {
	ctx := cmd.Context()
	what := fmt.Sprintf("%s RolloutGroup %q in namespace %q", c.name, key.Name, key.Namespace)
	for attempt := 1; ; attempt++ {
		rg := &v1alpha1.RolloutGroup{}
		if err := getObject(ctx, s, "RolloutGroup", key, rg); err != nil {
			return "", err
		}
		if why := c.refuse(rg); why != "" {
			return "", fmt.Errorf("%s: refused: %s", what, why)
		}
		content, did := c.change(rg, now())
		content["metadata"] = mergeMaps(content["metadata"], map[string]any{"resourceVersion": rg.ResourceVersion})
		data, err := json.Marshal(content)
		if err != nil {
			return "", err
		}
		err = s.client.Patch(ctx, rg, client.RawPatch(types.MergePatchType, data), client.FieldValidation("Strict"))
		switch {
		case err == nil:
			return fmt.Sprintf("rolloutgroup.echelon.dev/%s %s", rg.Name, did), nil
		case apierrors.IsConflict(err) && attempt < maxConflicts:
			continue
		case apierrors.IsBadRequest(err) || apierrors.IsInvalid(err):
			return "", fmt.Errorf("%s: the API server refused the change (is the operator's CRD older than this plugin?): %s", what, refusal(err))
		}
		return "", explain(err, s.host, what)
	}
}

// refusal is why the API server refused a patch: the strict decoder's
// complaint alone when there is one, since the message around it quotes the
// whole object.
func refusal(err error) string {
	msg := OneLine(errors.New(kube.APIMessage(err)))
	if i := strings.Index(msg, "strict decoding error:"); i >= 0 {
		return msg[i:]
	}
	return msg
}

func mergeMaps(a any, b map[string]any) map[string]any {
	out := map[string]any{}
	if m, ok := a.(map[string]any); ok {
		for k, v := range m {
			out[k] = v
		}
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// annotate is the change that sets a control annotation to a fresh value:
// the operator acts once per value, so every request must differ.
func annotate(key string, now time.Time) (map[string]any, string) {
	value := now.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	return map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}}, key + "=" + value
}
