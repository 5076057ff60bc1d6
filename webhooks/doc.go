// Package webhooks is where Echelon's admission webhooks live: the no-downscale
// and prepare-downscale webhooks of ScalingPolicy, and validation that needs
// other objects. None is served yet. RolloutGroup needs none: every rule on it
// concerns the object alone and is a CEL rule on its CRD, so the API server
// enforces it with no webhook in the request path.
package webhooks
