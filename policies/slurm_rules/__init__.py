"""The rules the policy pack and the stack config share, under one module name each:
the Kubernetes rules for names, quantities and CIDRs (`kube_rules`) and the exact
cell fit of the tenants' guarantees (`cell_fit`). They import nothing of either side."""
