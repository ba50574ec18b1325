package routerweb

import (
	"github.com/knitdev/knit/federation/router"
	"github.com/knitdev/knit/rm/rest"
)

// submissionOf reads what placing a REST submission needs of its
// ApplicationSubmissionContextInfo, sent as JSON or XML as contentType
// says: the id, the name and the queue. The home reads and checks the
// rest, from the same bytes.
func submissionOf(contentType string, body []byte) (router.Submission, error) {
	var in struct {
		ID    string `json:"application-id"`
		Name  string `json:"application-name"`
		Queue string `json:"queue"`
	}
	if err := rest.DecodeBody(contentType, rest.SubmissionRoot, body, &in); err != nil {
		return router.Submission{}, err
	}
	if in.ID == "" {
		return router.Submission{}, rest.BadRequest("Missing ApplicationSubmissionContextInfo or applicationSubmissionContex information.")
	}
	if err := rest.CheckApplicationID(in.ID); err != nil {
		return router.Submission{}, err
	}
	return router.Submission{Application: in.ID, Name: in.Name, Queue: in.Queue}, nil
}
