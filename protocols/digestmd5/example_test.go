package digestmd5_test

import (
	"errors"
	"fmt"

	"github.com/knitdev/knit/protocols/digestmd5"
)

// A whole exchange as Hadoop's TOKEN authentication runs it: the server's
// challenge travels in the NEGOTIATE reply, the client's response in
// INITIATE, and "rspauth=…" in SUCCESS. Fixed nonces make the output stable;
// real code leaves Nonce and CNonce nil.
func Example() {
	passwords := map[string]string{"Cg0KCQgBEIDb0Ie1MhABEPGH56cE": "AS74BA2YC5fwAyaqxgzYq+dUBHI="}
	server, err := digestmd5.NewServer(digestmd5.ServerConfig{
		Nonce: func() (string, error) { return "VYIJP51hYpZJG8OlFZEZyyxe2L0UslKHrF+nBZcR", nil },
		Lookup: func(username string) (string, error) {
			if pw, ok := passwords[username]; ok {
				return pw, nil
			}
			return "", errors.New("unknown token")
		},
	})
	if err != nil {
		panic(err)
	}
	client := digestmd5.NewClient(digestmd5.ClientConfig{
		Username: "Cg0KCQgBEIDb0Ie1MhABEPGH56cE",
		Password: "AS74BA2YC5fwAyaqxgzYq+dUBHI=",
		CNonce:   func() (string, error) { return "qXvXfjmv/lSl806CY2Ab6IkhrJXCaqL2egkY+eer", nil },
	})

	challenge, _ := server.Challenge()
	response, _ := client.Respond(challenge)
	final, err := server.Evaluate(response)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(final))
	fmt.Println(client.Verify(final), server.Username())
	// Output:
	// rspauth=7e1c4103f63d8b38e06ba5c558624d8e
	// <nil> Cg0KCQgBEIDb0Ie1MhABEPGH56cE
}
