// Command etcdlock runs commands under etcd locks, exposes lock operations
// to scripts, and runs a local etcd for development. See `etcdlock --help`.
package main

import "os"

func main() { os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
