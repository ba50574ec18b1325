package routerweb

import (
	"encoding/json"

	"github.com/knitdev/knit/federation/router"
	"github.com/knitdev/knit/rm/rest"
)

// submissionOf reads what placing a REST submission needs of its
// ApplicationSubmissionContextInfo: the id, the name and the queue. The
// home reads and checks the rest.
func submissionOf(body []byte) (router.Submission, error) {
	var in struct {
		ID    string `json:"application-id"`
		Name  string `json:"application-name"`
		Queue string `json:"queue"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return router.Submission{}, rest.BadRequest("invalid application submission context: " + err.Error())
	}
	if in.ID == "" {
		return router.Submission{}, rest.BadRequest("Missing ApplicationSubmissionContextInfo or applicationSubmissionContex information.")
	}
	if err := rest.CheckApplicationID(in.ID); err != nil {
		return router.Submission{}, err
	}
	return router.Submission{Application: in.ID, Name: in.Name, Queue: in.Queue}, nil
}
