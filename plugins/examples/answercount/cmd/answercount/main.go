// Command answercount serves the answercount strategy as a cde-run plugin:
//
//	go build -o bin/answercount ./plugins/examples/answercount/cmd/answercount
//
// and in the config:
//
//	strategies:
//	  - {plugin: ./bin/answercount, params: {beta: 0.5}}
package main

import (
	"github.com/cde-rl/cde/plugins/examples/answercount"
	"github.com/cde-rl/cde/plugins/sdk"
)

func main() { sdk.Serve(answercount.New) }
