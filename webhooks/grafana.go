/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/migrate"
)

// Paths of the Grafana rollout-operator's webhooks that are not Echelon's
// own, answered in compat mode so that its webhook configurations can
// point at Echelon unchanged. Its no-downscale and prepare-downscale paths
// are PathNoDownscale and PathPrepareDownscale.
const (
	PathGrafanaPodEviction    = "/admission/" + metrics.WebhookGrafanaPodEviction
	PathGrafanaZPDBValidation = "/admission/" + metrics.WebhookGrafanaZPDBValidation
)

// reasonZPDBInvalid is the metric reason of a ZoneAwarePodDisruptionBudget
// refused for its fields.
const reasonZPDBInvalid = "invalid-zpdb"

// ZPDBValidation validates a ZoneAwarePodDisruptionBudget's fields on
// CREATE and UPDATE, as the Grafana operator's zpdb-validation webhook does:
// compat mode translates it into a ZoneDisruptionBudget (or a RolloutGroup's
// disruptionBudget), and refuses one it could not translate, naming the
// field, so that no budget is silently left unenforced.
type ZPDBValidation struct{}

func (ZPDBValidation) decide(_ context.Context, req *admissionv1.AdmissionRequest) verdict {
	if req.Resource.Group != migrate.ZoneAwarePDBGroup || req.SubResource != "" ||
		(req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return unhandled(metrics.WebhookGrafanaZPDBValidation, describe(req))
	}
	var obj unstructured.Unstructured
	if err := json.Unmarshal(req.Object.Raw, &obj.Object); err != nil || obj.Object == nil {
		return failed(reasonMalformed, http.StatusBadRequest, fmt.Errorf("request.object is not a %s: %v", migrate.ZoneAwarePDBKind, err))
	}
	if gk := obj.GroupVersionKind().GroupKind(); gk != (schema.GroupKind{Group: migrate.ZoneAwarePDBGroup, Kind: migrate.ZoneAwarePDBKind}) {
		return unhandled(metrics.WebhookGrafanaZPDBValidation, describe(req))
	}
	spec, _, err := unstructured.NestedMap(obj.Object, "spec")
	if err != nil {
		return deny(reasonZPDBInvalid, fmt.Sprintf("%s %s: spec: %v", migrate.ZoneAwarePDBKind, req.Name, err))
	}
	errs := ValidateZoneAwarePDB(migrate.ZoneAwarePDB{Namespace: req.Namespace, Name: req.Name, Spec: spec})
	if len(errs) == 0 {
		return allow(reasonValid)
	}
	return deny(reasonZPDBInvalid, fmt.Sprintf("%s %s is invalid: %s", migrate.ZoneAwarePDBKind, req.Name, errs.ToAggregate().Error()))
}

// ValidateZoneAwarePDB is migrate.ValidateZoneAwarePDB as field errors.
func ValidateZoneAwarePDB(pdb migrate.ZoneAwarePDB) field.ErrorList {
	var errs field.ErrorList
	for _, f := range migrate.ValidateZoneAwarePDB(pdb) {
		parts := strings.Split(f.Key, ".")
		errs = append(errs, field.Invalid(field.NewPath(parts[0], parts[1:]...), field.OmitValueType{}, f.Message))
	}
	return errs
}
