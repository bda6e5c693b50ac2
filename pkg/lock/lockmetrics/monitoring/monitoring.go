// Package monitoring ships a Grafana dashboard and Prometheus alerting
// rules for the metrics of packages lockmetrics and electionmetrics, as
// files beside this one (dashboard.json, alerts.yaml) and embedded here for
// programs that install them. A test checks that they parse and that every
// metric they name is one those packages register.
package monitoring

import _ "embed"

// Dashboard is the Grafana dashboard (dashboard.json): locks held and
// waiting, losses by reason, wait and hold times, renewal latency and
// failures, and each election's leader, changes and losses.
//
//go:embed dashboard.json
var Dashboard []byte

// Alerts are the Prometheus alerting rules (alerts.yaml): locks lost, a
// lock held long, renewals slow or failing, waiters piling up, no leader,
// more than one, leadership lost and flapping.
//
//go:embed alerts.yaml
var Alerts []byte
