module github.com/knitdev/knit

go 1.26.8

require (
	github.com/beltran/gosasl v1.0.0
	github.com/cenkalti/backoff/v4 v4.3.0
	go.uber.org/goleak v1.3.0
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/beltran/gssapi v0.0.0-20200324152954-d86554db4bab // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
)
