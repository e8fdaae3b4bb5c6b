"""Pure builders: config in, plain manifests out, for the components whose Pulumi side sits beside them
(components/<concern>.py). Nothing here imports Pulumi."""
